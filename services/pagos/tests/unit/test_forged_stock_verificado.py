"""A StockVerificado forged by whoever holds inventario's Kafka principal (it writes
inventory-events and reads order-events): it copies a victim's sealed token out of the victim's
OrdenSolicitada into events of its own. The token is sealed for the victim's one charge (saga,
order, customer, currency, amount), so every such event ends as a failed charge without a
gateway call, whatever saga id, amount, currency or customer it names; and the payment it made
is no customer's. The victim's own StockVerificado is charged, once."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest

from pagos import metrics as pagos_metrics
from pagos.config import PagosSettings
from pagos.domain.payment import PaymentStatus
from pagos.usecases.charge_payment import charge_payment
from pagos.usecases.start_charge import start_charge
from saga_contracts.events.inventory import StockVerificado
from saga_harness import sealing
from saga_harness.events import event, stock_verificado
from sagakit.message import Message

from .fakes import FakeCalls, FakeGateway, FakePayments, FakeUnit, FakeUnits, PaymentTable, Row

VICTIM = "cust-victim"
VICTIMS_CARD = "tok_victim_card"


def _victims() -> Message[StockVerificado]:
    """The victim's genuine StockVerificado: two units at 9.99 USD, the token sealed by
    pedidos for this saga's charge."""
    return stock_verificado(str(uuid.uuid4()), str(uuid.uuid4()), token=VICTIMS_CARD,
                            customer=VICTIM)


def _forged(victims: Message[StockVerificado], *, saga_id: str | None = None,
            amount: str | None = None, currency: str | None = None,
            customer: str = VICTIM) -> Message[StockVerificado]:
    """An event the attacker writes: the victim's order id and sealed token, and whatever
    saga id, amount, currency and ``metadata.user_id`` it likes."""
    p = victims.payload
    amount = amount or f"{p.total_amount:.2f}"
    payload: dict[str, Any] = {
        "order_id": p.order_id, "total_amount": amount, "currency": currency or p.currency,
        "items": [{"sku": "SKU-1", "quantity": 1, "unit_price": amount}],
        "payment_method": {"type": "credit_card", "token": p.payment_method.token}}
    return event(StockVerificado, saga_id or victims.saga_id, "inventario", payload,
                 metadata={"user_id": customer})


async def _handled(table: PaymentTable, gateway: FakeGateway,
                   event: Message[StockVerificado]) -> Row:
    """``event`` handled as pagos does: the payment started, then its charge call made."""
    uow, calls = FakeUnit(table), FakeCalls(free=1)
    await start_charge(uow, FakePayments(table, uow), calls, event)
    [payment] = calls.started
    await charge_payment(FakeUnits(table), gateway, PagosSettings(), payment, lambda: None,
                         tokens=sealing.opening_keys())
    return table.rows[event.saga_id]


def _mismatches() -> float:
    return pagos_metrics.SEALED_TOKEN_MISMATCHES.labels("pagos")._value.get()


def _failed_without_a_call(row: Row, gateway: FakeGateway) -> None:
    assert gateway.calls == [], "the victim's card was not charged"
    assert row.status is PaymentStatus.CHARGE_FAILED and not row.charge_sent
    [attempt] = row.attempt_log
    assert attempt["outcome"] == "not_asked"
    assert attempt["detail"].startswith("payment token is not for this charge")
    assert row.customer_id is None, "no customer sees a payment a forged event made"


async def test_the_victims_own_event_is_charged_once() -> None:
    table, gateway = PaymentTable(), FakeGateway()
    victims = _victims()
    row = await _handled(table, gateway, victims)
    [(kind, call)] = gateway.calls
    assert (kind, call["token"], call["amount_minor"]) == ("charge", VICTIMS_CARD, 1998)
    assert row.status is PaymentStatus.CAPTURED and row.customer_id == VICTIM


async def test_copies_of_a_victims_token_under_new_saga_ids_charge_nothing() -> None:
    """The review's scenario: three forged events, each a new saga (so a fresh idempotency key
    at the gateway), the victim's order id and token, any amount."""
    table, gateway = PaymentTable(), FakeGateway()
    victims = _victims()
    mismatches = _mismatches()
    for _ in range(3):
        row = await _handled(table, gateway, _forged(victims, saga_id=str(uuid.uuid4()),
                                                     amount="9999.99"))
        _failed_without_a_call(row, gateway)
    assert _mismatches() == mismatches + 3
    assert all(r.status is PaymentStatus.CHARGE_FAILED for r in table.rows.values())
    assert {r.customer_id for r in table.rows.values()} == {None}


@pytest.mark.parametrize("forgery", [
    {"saga_id": "new"},
    {"amount": "9999.99"},
    {"amount": "19.97"},
    {"currency": "EUR"},
    {"customer": "attacker"},
])
async def test_a_forged_event_differing_from_the_sealed_charge_in_one_value_charges_nothing(
        forgery: dict[str, str]) -> None:
    """Even the victim's own saga id, with another amount, currency or user_id, does not open
    the token: each value is bound."""
    table, gateway = PaymentTable(), FakeGateway()
    victims = _victims()
    if forgery.get("saga_id") == "new":
        forgery = {"saga_id": str(uuid.uuid4())}
    row = await _handled(table, gateway, _forged(victims, **forgery))
    _failed_without_a_call(row, gateway)


async def test_a_forged_event_with_every_value_of_the_victims_charge_is_that_charge() -> None:
    """What the attacker can still do: ask for exactly the charge the victim placed, under its
    saga's idempotency key, which the victim's own event asks for too (the gateway makes it
    once)."""
    table, gateway = PaymentTable(), FakeGateway()
    victims = _victims()
    row = await _handled(table, gateway, _forged(victims))
    [(_, call)] = gateway.calls
    assert call["idempotency_key"] == f"charge-{victims.saga_id}"
    assert call["amount_minor"] == 1998 and row.amount == Decimal("19.98")
