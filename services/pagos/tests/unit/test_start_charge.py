"""start_charge: StockVerificado makes a payment due for charging (leased to a gateway call
started right after the commit when the worker has a free slot), never a second one for the
saga; a replay of it by an operator makes a given-up charge due again and nothing else."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from pagos.domain.payment import PaymentStatus
from pagos.usecases.start_charge import start_charge
from saga_contracts.events.inventory import StockVerificado
from saga_harness import sealing
from saga_harness.events import stock_verificado
from sagakit.message import Message
from sagakit.store.unit_of_work import AlreadyProcessed

from .fakes import FakeCalls, FakePayments, FakeUnit, PaymentTable


def _ids() -> tuple[str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4())


async def _start(table: PaymentTable, calls: FakeCalls, event: Message[StockVerificado],
                 uow: FakeUnit | None = None) -> FakeUnit:
    uow = uow or FakeUnit(table)
    await start_charge(uow, FakePayments(table, uow), calls, event)
    return uow


async def test_with_no_free_slot_the_charge_is_created_due_now_and_unleased() -> None:
    table, calls = PaymentTable(), FakeCalls(free=0)
    saga_id, order_id = _ids()
    event = stock_verificado(saga_id, order_id)
    uow = await _start(table, calls, event)
    row = table.rows[saga_id]
    assert row.status is PaymentStatus.CHARGING
    assert (row.order_id, row.amount, row.currency, row.token) == (
        order_id, Decimal("19.98"), "USD", event.payload.payment_method.token), \
        "the token kept sealed, as it came"
    charge = sealing.charge(saga_id=saga_id, order_id=order_id, amount="19.98")
    assert sealing.opening_keys().open(row.token, charge) == "tok_visa"
    assert row.next_attempt_at == table.now and row.lease_until is None
    assert row.trigger is not None and row.trigger["message_id"] == event.message_id
    assert row.trigger["event"]["payload"]["payment_method"] == {"type": "credit_card"}, \
        "the payment keeps the request without its token"
    assert uow.commits == 1 and uow.emitted == []
    assert calls.kicks == 1 and calls.started == []


async def test_with_a_free_slot_the_charge_is_leased_and_its_call_started_after_the_commit(
        ) -> None:
    table, calls = PaymentTable(), FakeCalls(free=1)
    saga_id, order_id = _ids()
    event = stock_verificado(saga_id, order_id)
    uow = await _start(table, calls, event)
    row = table.rows[saga_id]
    assert row.lease_until == table.in_(calls.lease_s)
    assert [p.saga_id for p in calls.started] == [saga_id]
    started = calls.started[0]
    assert started.leased and started.lease_until == row.lease_until
    assert started.status is PaymentStatus.CHARGING
    assert started.token == event.payload.payment_method.token
    assert calls.free == 0 and calls.released == 0, "the slot is the call's now"
    assert calls.kicks == 0 and uow.commits == 1


@pytest.mark.parametrize("status", [PaymentStatus.CANCELLED, PaymentStatus.CHARGING,
                                    PaymentStatus.CAPTURED])
async def test_a_saga_that_has_a_payment_is_never_charged_twice(status: PaymentStatus) -> None:
    table, calls = PaymentTable(), FakeCalls(free=1)
    saga_id, order_id = _ids()
    before = table.add(saga_id, status, token=None, charge_attempts=1)
    uow = await _start(table, calls, stock_verificado(saga_id, order_id))
    assert table.rows[saga_id] is before and before.status is status
    assert before.charge_attempts == 1 and before.token is None
    assert uow.commits == 1, "the message is recorded as processed all the same"
    assert calls.started == [] and calls.kicks == 0
    assert calls.free == 1 and calls.released == 1, "the unused slot is given back"


async def test_a_commit_that_fails_gives_the_slot_back_and_starts_nothing() -> None:
    table, calls = PaymentTable(), FakeCalls(free=1)
    saga_id, order_id = _ids()
    event = stock_verificado(saga_id, order_id)
    uow = FakeUnit(table, commit_raises=AlreadyProcessed(event.message_id))
    with pytest.raises(AlreadyProcessed):
        await _start(table, calls, event, uow)
    assert saga_id not in table.rows
    assert calls.started == [] and calls.kicks == 0
    assert calls.free == 1 and calls.released == 1


async def test_a_replay_makes_a_given_up_charge_due_again_with_its_first_token() -> None:
    """The charge's idempotency key binds it to its first call's token: a replay bringing
    another would be refused and prove nothing."""
    table, calls = PaymentTable(), FakeCalls(free=1)
    saga_id, order_id = _ids()
    first = sealing.sealed("tok_visa", sealing.charge(saga_id=saga_id, order_id=order_id,
                                                      amount="19.98"))
    table.add(saga_id, PaymentStatus.CHARGE_FAILED, token=first, charge_attempts=3,
              lease_until=table.in_(-5), next_attempt_at=None)
    uow = await _start(table, calls, stock_verificado(saga_id, order_id, token="tok_other",
                                                      replay_of="m-1"))
    row = table.rows[saga_id]
    assert row.status is PaymentStatus.CHARGING and row.token == first
    assert row.charge_attempts == 0, "a fresh retry schedule"
    assert row.lease_until is None and row.next_attempt_at == table.now
    assert uow.commits == 1 and uow.emitted == []
    assert calls.kicks == 1, "the worker woken after the commit"
    assert calls.started == [] and calls.free == 1, "no slot taken: the worker claims it"


async def test_replay_of_in_the_envelope_without_the_operators_signature_charges_nothing_again(
) -> None:
    """Anyone who can write the topic can write ``metadata.replay_of``: only a replay the
    consumer found signed by the operator for pagos (``Message.replayed``) is one."""
    table, calls = PaymentTable(), FakeCalls(free=1)
    saga_id, order_id = _ids()
    row = table.add(saga_id, PaymentStatus.CHARGE_FAILED, token="tok_visa", charge_attempts=3,
                    lease_until=table.in_(-5), next_attempt_at=None)
    await _start(table, calls, stock_verificado(saga_id, order_id, replay_of="m-1",
                                                signed_replay=False))
    assert row.status is PaymentStatus.CHARGE_FAILED and row.charge_attempts == 3
    assert calls.kicks == 0 and calls.started == []


async def test_a_replay_for_a_payment_that_kept_no_token_brings_its_own() -> None:
    table, calls = PaymentTable(), FakeCalls()
    saga_id, order_id = _ids()
    table.add(saga_id, PaymentStatus.CHARGE_FAILED, token=None, charge_attempts=3)
    await _start(table, calls, stock_verificado(saga_id, order_id, token="tok_replay",
                                                replay_of="m-1"))
    row = table.rows[saga_id]
    assert row.status is PaymentStatus.CHARGING and row.token is not None
    charge = sealing.charge(saga_id=saga_id, order_id=order_id, amount="19.98")
    assert sealing.opening_keys().open(row.token, charge) == "tok_replay"


@pytest.mark.parametrize("status", [s for s in PaymentStatus
                                    if s is not PaymentStatus.CHARGE_FAILED])
async def test_a_replay_for_a_payment_decided_since_changes_nothing(
        status: PaymentStatus) -> None:
    table, calls = PaymentTable(), FakeCalls(free=1)
    saga_id, order_id = _ids()
    row = table.add(saga_id, status, token="tok_visa", charge_attempts=2)
    uow = await _start(table, calls, stock_verificado(saga_id, order_id, replay_of="m-1"))
    assert row.status is status and row.charge_attempts == 2 and row.next_attempt_at is None
    assert uow.commits == 1 and uow.committed
    assert calls.kicks == 0 and calls.started == [] and calls.free == 1


async def test_a_replay_for_a_saga_with_no_payment_starts_the_charge() -> None:
    table, calls = PaymentTable(), FakeCalls(free=1)
    saga_id, order_id = _ids()
    uow = await _start(table, calls, stock_verificado(saga_id, order_id, replay_of="m-1"))
    assert table.rows[saga_id].status is PaymentStatus.CHARGING
    assert [p.saga_id for p in calls.started] == [saga_id]
    assert uow.commits == 1


async def test_the_payment_is_the_customers_its_events_envelope_names() -> None:
    table, calls = PaymentTable(), FakeCalls(free=0)
    saga_id, order_id = _ids()
    await _start(table, calls, stock_verificado(saga_id, order_id, customer="cust-31"))
    assert table.rows[saga_id].customer_id == "cust-31"


async def test_an_event_that_names_no_customer_leaves_the_payment_to_operators() -> None:
    table, calls = PaymentTable(), FakeCalls(free=0)
    saga_id, order_id = _ids()
    await _start(table, calls, stock_verificado(saga_id, order_id, customer=None))
    assert table.rows[saga_id].customer_id is None


async def test_the_charge_is_for_stock_verificados_amount_the_catalogs() -> None:
    """inventario computed the amount from its catalog; pagos charges that and nothing of the
    order's own."""
    table, calls = PaymentTable(), FakeCalls(free=0)
    saga_id, order_id = _ids()
    await _start(table, calls, stock_verificado(saga_id, order_id, unit_price="500.00",
                                                currency="CLP"))
    row = table.rows[saga_id]
    assert (row.amount, row.currency) == (Decimal("1000.00"), "CLP")
