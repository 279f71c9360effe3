"""place_order on in-memory storage: the order, its saga, its first history entry and
OrdenSolicitada in one commit; the same Idempotency-Key with the same body returns the first order
and writes nothing, with another body it is refused, and another customer's key is no concern of
this customer's; the saga's first event names the request's span as its parent
(docs/standard.md#saga-and-span-ids), and the saga's row keeps that span; the payment token is
sealed for pagos before anything is written, and only the sealed token is."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import hmac
import json
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from prometheus_client import REGISTRY

from pedidos.config import PedidosSettings
from pedidos.domain.order import SAGA_TYPE, OrderStatus
from pedidos.usecases.fingerprints import Fingerprints, legacy_request
from pedidos.usecases.place_order import IdempotencyKeyReused, PlacedOrder, place_order
from saga_contracts import sealing as contract_sealing
from saga_harness import sealing
from sagakit.envelope import new_span_id

from .fakes import ORDER_BODY, OrderTables, unit

FINGERPRINTS = Fingerprints(b"a test fingerprint key, 32 bytes+")


async def _place(tables: OrderTables, body: dict = ORDER_BODY,
                 key: str | None = None, span: str | None = None) -> PlacedOrder:
    uow, orders = unit(tables)
    placed = await place_order(uow, orders, body, Decimal("10.00"), key, PedidosSettings(),
                               sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS,
                               request_span_id=span)
    assert uow.commits == 1
    return placed


def _sagas_started() -> float:
    return REGISTRY.get_sample_value("sagas_started_total", {"saga_type": SAGA_TYPE}) or 0.0


async def test_an_order_is_placed_with_its_saga_history_and_event_in_one_commit() -> None:
    tables, settings = OrderTables(), PedidosSettings()
    started = _sagas_started()
    uow, orders = unit(tables)
    placed = await place_order(uow, orders, ORDER_BODY, Decimal("10.00"), None, settings,
                               sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)

    assert placed.created and placed.status == "PENDIENTE_VALIDACION"
    assert uow.commits == 1 and uow.committed
    saga = tables.sagas[placed.saga_id]
    assert (saga.order_id, saga.status) == (placed.order_id, OrderStatus.PENDIENTE_VALIDACION)
    assert saga.step_deadline_at == tables.now + timedelta(seconds=settings.validation_timeout_s)
    assert saga.expires_at == tables.now + timedelta(seconds=settings.saga_timeout_s)
    order = tables.orders[placed.order_id]
    assert (order.status, order.total_amount, order.idempotency_key) == (
        "PENDIENTE_VALIDACION", Decimal("10.00"), None)
    [history] = tables.history
    assert (history.event_type, history.actor, history.from_status, history.to_status) == (
        "OrdenSolicitada", "c-1", None, "PENDIENTE_VALIDACION")

    [event] = uow.emitted
    assert (event.event_type, event.saga_id) == ("OrdenSolicitada", placed.saga_id)
    sealed = event.payload["payment_method"]["token"]
    assert event.payload == {
        "order_id": placed.order_id, "customer_id": "c-1", "items": ORDER_BODY["items"],
        "total_amount": "10.00", "currency": "USD",
        "shipping_address": ORDER_BODY["shipping_address"],
        "payment_method": {"type": "credit_card", "token": sealed}}
    assert event.metadata == {"correlation_id": placed.order_id, "user_id": "c-1",
                              "channel": "api"}
    context = tables.contexts[placed.saga_id]
    assert (context["order_id"], context["total_amount"], context["items"]) == (
        placed.order_id, "10.00", 1)
    assert _sagas_started() == started + 1


async def test_orden_solicitada_names_the_request_span_as_its_parent() -> None:
    tables, request_span = OrderTables(), new_span_id()
    uow, orders = unit(tables)
    placed = await place_order(uow, orders, ORDER_BODY, Decimal("10.00"), None,
                               PedidosSettings(), sealer=sealing.sealing_key(),
                               fingerprints=FINGERPRINTS, request_span_id=request_span)
    [event] = uow.emitted
    assert event.event_type == "OrdenSolicitada"
    assert event.parent_span_id == request_span != event.span_id
    headers = event.kafka_headers()
    assert (headers["X-Saga-ID"], headers["X-Span-ID"], headers["X-Parent-Span-ID"]) == (
        event.saga_id, event.span_id, request_span)
    assert tables.contexts[placed.saga_id]["request_span_id"] == request_span


async def test_an_order_placed_outside_a_request_still_has_a_parent_span() -> None:
    tables = OrderTables()
    uow, orders = unit(tables)
    placed = await place_order(uow, orders, ORDER_BODY, Decimal("10.00"), None,
                               PedidosSettings(), sealer=sealing.sealing_key(),
                               fingerprints=FINGERPRINTS)
    [event] = uow.emitted
    assert event.parent_span_id and uuid.UUID(event.parent_span_id)
    assert event.parent_span_id != event.span_id
    assert tables.contexts[placed.saga_id]["request_span_id"] == event.parent_span_id


async def test_the_same_key_and_body_return_the_first_order_and_write_nothing() -> None:
    tables = OrderTables()
    first = await _place(tables, key="k-1")
    started = _sagas_started()

    uow, orders = unit(tables)
    again = await place_order(uow, orders, copy.deepcopy(ORDER_BODY), Decimal("10.00"), "k-1",
                              PedidosSettings(), sealer=sealing.sealing_key(),
                              fingerprints=FINGERPRINTS)
    assert again == PlacedOrder(first.order_id, first.saga_id, "PENDIENTE_VALIDACION",
                                created=False)
    assert uow.commits == 1 and not uow.committed
    assert uow.emitted == [], "no second OrdenSolicitada"
    assert (len(tables.orders), len(tables.sagas), len(tables.history)) == (1, 1, 1)
    assert _sagas_started() == started, "no saga started"


async def test_a_replay_returns_the_first_orders_status_as_it_is_now() -> None:
    tables = OrderTables()
    first = await _place(tables, key="k-1")
    tables.move_elsewhere(first.saga_id, OrderStatus.PENDIENTE_PAGO)
    again = await _place(tables, key="k-1")
    assert (again.saga_id, again.status, again.created) == (first.saga_id, "PENDIENTE_PAGO",
                                                             False)


async def test_the_same_key_with_another_body_is_refused_and_writes_nothing() -> None:
    tables = OrderTables()
    await _place(tables, key="k-1")
    other = {**ORDER_BODY, "currency": "EUR"}
    uow, orders = unit(tables)
    with pytest.raises(IdempotencyKeyReused):
        await place_order(uow, orders, other, Decimal("10.00"), "k-1", PedidosSettings(),
                          sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)
    assert uow.emitted == []
    assert (len(tables.orders), len(tables.history)) == (1, 1)


async def test_a_key_another_customer_used_is_a_new_order_of_its_own() -> None:
    tables = OrderTables()
    first = await _place(tables, key="k-1")
    other_customer = {**ORDER_BODY, "customer_id": f"{ORDER_BODY['customer_id']}-other"}
    theirs = await _place(tables, other_customer, key="k-1")
    assert theirs.created and theirs.order_id != first.order_id
    assert {o.customer_id for o in tables.orders.values()} == {
        ORDER_BODY["customer_id"], other_customer["customer_id"]}
    # Each customer's replay finds its own order.
    assert (await _place(tables, key="k-1")).order_id == first.order_id
    assert (await _place(tables, other_customer, key="k-1")).order_id == theirs.order_id


async def test_orders_without_a_key_are_each_a_new_order() -> None:
    tables = OrderTables()
    first = await _place(tables)
    second = await _place(tables)
    assert first.created and second.created
    assert first.order_id != second.order_id and first.saga_id != second.saga_id
    assert len(tables.orders) == len(tables.sagas) == 2


async def test_the_payment_token_is_sealed_for_pagos_and_stored_only_sealed() -> None:
    """What pedidos writes (the order, its saga, its history, OrdenSolicitada in the outbox)
    holds the token sealed for pagos; the request itself is left as it came."""
    tables = OrderTables()
    body = {**ORDER_BODY, "payment_method": {"type": "credit_card", "token": "tok_visa_7f3c"}}
    uow, orders = unit(tables)
    placed = await place_order(uow, orders, body, Decimal("10.00"), None, PedidosSettings(),
                               sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)

    [event] = uow.emitted
    sealed = event.payload["payment_method"]["token"]
    assert contract_sealing.is_sealed(sealed)
    assert contract_sealing.key_id_of(sealed) == sealing.TEST_KEY_ID
    charge = sealing.charge(saga_id=placed.saga_id, order_id=placed.order_id,
                            amount="10.00", currency="USD", customer_id="c-1")
    assert sealing.opening_keys().open(sealed, charge) == "tok_visa_7f3c"
    assert tables.orders[placed.order_id].body["payment_method"]["token"] == sealed
    written = repr([event.to_dict(), [vars(o) for o in tables.orders.values()],
                    [vars(h) for h in tables.history], tables.contexts])
    assert "tok_visa_7f3c" not in written
    assert body["payment_method"]["token"] == "tok_visa_7f3c", "the request is not changed"


async def test_a_request_sent_again_is_the_same_request_though_each_seal_differs() -> None:
    """The idempotency check compares the request, not its sealed form (which a second sealing
    changes)."""
    tables = OrderTables()
    first = await _place(tables, key="k-1")
    again = await _place(tables, key="k-1")
    assert again.order_id == first.order_id and not again.created
    charge = sealing.charge(saga_id=first.saga_id, order_id=first.order_id)
    assert sealing.sealed("tok_visa", charge) != sealing.sealed("tok_visa", charge)


async def test_the_token_is_sealed_for_the_sagas_charge_and_no_other() -> None:
    """Bound to the saga, the order, the customer the bearer token named, the currency and the
    order's total in minor units: what pagos opens it with for the StockVerificado of this saga
    (inventario charges the order's total, its prices being the catalog's). A copy of it in an
    event of another saga, or of this saga with another amount, currency or customer, does not
    open."""
    tables = OrderTables()
    body = {**ORDER_BODY, "customer_id": "c-7", "currency": "EUR",
            "items": [{"sku": "SKU-1", "quantity": 3, "price": "4.15"}]}
    uow, orders = unit(tables)
    placed = await place_order(uow, orders, body, Decimal("12.45"), None, PedidosSettings(),
                               sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)
    [event] = uow.emitted
    sealed = event.payload["payment_method"]["token"]
    assert event.metadata["user_id"] == "c-7" and event.saga_id == placed.saga_id
    bound = contract_sealing.Binding(saga_id=placed.saga_id, order_id=placed.order_id,
                                     customer_id="c-7", currency="EUR", amount_minor=1245)
    keys = sealing.opening_keys()
    assert keys.open(sealed, bound) == "tok_visa"
    for other in (dataclasses.replace(bound, saga_id=str(uuid.uuid4())),
                  dataclasses.replace(bound, order_id=str(uuid.uuid4())),
                  dataclasses.replace(bound, customer_id="c-1"),
                  dataclasses.replace(bound, currency="USD"),
                  dataclasses.replace(bound, amount_minor=1246)):
        with pytest.raises(contract_sealing.CannotOpen):
            keys.open(sealed, other)


# ---- the keyed fingerprints: no clear token in any hash, nothing matchable without the key


async def test_the_request_hash_is_keyed_and_made_without_the_clear_token() -> None:
    """A bare SHA-256 of the body (which holds the clear card token) could be matched against
    a list of card numbers by whoever reads the table; keyed, it cannot without the key."""
    tables = OrderTables()
    body = {**ORDER_BODY, "payment_method": {"type": "credit_card", "token": "tok_visa_4242"}}
    placed = await _place(tables, body=body, key="k-hash")
    order = tables.orders[placed.order_id]
    assert order.request_hash == FINGERPRINTS.request(body)
    assert order.request_hash != legacy_request(body)
    other_key = Fingerprints(b"another fingerprint key, 32 bytes")
    assert other_key.request(body) != order.request_hash
    # Of the token's fingerprint, not of the token: the same hash whatever reads the token.
    without_token = {**body, "payment_method": {"type": "credit_card",
                                                "token": FINGERPRINTS.card("tok_visa_4242")}}
    assert order.request_hash == "hmac-sha256:" + hmac.new(
        b"a test fingerprint key, 32 bytes+", b"request\0" + json.dumps(
            without_token, sort_keys=True, separators=(",", ":")).encode(),
        hashlib.sha256).hexdigest()
    assert order.card_fingerprint == FINGERPRINTS.card("tok_visa_4242")
    assert "tok_visa_4242" not in repr(dataclasses.replace(order, body={}))


async def test_an_order_placed_with_the_bare_hash_is_still_its_requests_for_its_key() -> None:
    """Orders placed before the key hold a bare SHA-256: the same request sent again under
    their Idempotency-Key gets that order back, and another body is still refused."""
    tables = OrderTables()
    first = await _place(tables, key="k-legacy")
    tables.orders[first.order_id].request_hash = legacy_request(ORDER_BODY)
    again = await _place(tables, key="k-legacy")
    assert again.order_id == first.order_id and not again.created
    other = {**ORDER_BODY, "payment_method": {"type": "credit_card", "token": "tok_other"}}
    uow, orders = unit(tables)
    with pytest.raises(IdempotencyKeyReused):
        await place_order(uow, orders, other, Decimal("10.00"), "k-legacy", PedidosSettings(),
                          sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)


def test_a_cards_fingerprint_is_the_same_for_every_customer_and_never_a_requests() -> None:
    assert FINGERPRINTS.card("tok_visa") == Fingerprints(
        b"a test fingerprint key, 32 bytes+").card("tok_visa")
    assert FINGERPRINTS.card("tok_visa") != FINGERPRINTS.card("tok_visa2")
    assert FINGERPRINTS.card("tok_visa") != Fingerprints(
        b"another fingerprint key, 32 bytes").card("tok_visa")
