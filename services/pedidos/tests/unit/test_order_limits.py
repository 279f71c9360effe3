"""The limits of POST /orders against card testing (pedidos.usecases.decline_velocity), on
in-memory storage: an order still waiting for its payment counts as a decline to come, so
orders sent before any decline is heard are held to the decline limits as orders sent one after
another; how many orders a customer, or a card, may have waiting is capped whatever its
declines; the declines alone refuse until the oldest leaves the window. They are counted
holding the customer's and the card's orders, and a refused order writes nothing; a request
sent again under its Idempotency-Key gets its order, over the limits or not."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest

from pedidos.config import PedidosSettings
from pedidos.domain.order import OrderStatus
from pedidos.usecases.decline_velocity import (
    TOO_MANY_DECLINES,
    OrderRefused,
    refusal,
    too_many_waiting,
)
from pedidos.usecases.fingerprints import Fingerprints
from pedidos.usecases.place_order import PlacedOrder, place_order
from pedidos.usecases.ports import Standing
from saga_harness import sealing

from .fakes import ORDER_BODY, OrderTables, unit

FINGERPRINTS = Fingerprints(b"a test fingerprint key, 32 bytes+")
# Waiting caps above the decline limits: the decline limits are what a burst meets first.
LOOSE_WAITING = {"waiting_orders_per_customer": 100, "waiting_orders_per_card": 100}


def _body(customer: str = "c-1", card: str | None = None) -> dict[str, Any]:
    return {**ORDER_BODY, "customer_id": customer, "payment_method": {
        "type": "credit_card", "token": card or f"tok_visa_{uuid.uuid4().hex[:8]}"}}


async def _place(tables: OrderTables, settings: PedidosSettings, body: dict[str, Any],
                 key: str | None = None) -> PlacedOrder:
    uow, orders = unit(tables)
    return await place_order(uow, orders, body, Decimal("10.00"), key, settings,
                             sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)


async def _refused(tables: OrderTables, settings: PedidosSettings,
                   body: dict[str, Any]) -> OrderRefused:
    before = (len(tables.orders), len(tables.outbox))
    uow, orders = unit(tables)
    with pytest.raises(OrderRefused) as refused:
        await place_order(uow, orders, body, Decimal("10.00"), None, settings,
                          sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)
    assert uow.commits == 0 and uow.emitted == []
    assert (len(tables.orders), len(tables.outbox)) == before, "a refused order writes nothing"
    return refused.value


def _decline(tables: OrderTables, placed: PlacedOrder) -> None:
    """pedidos heard the order's PagoRechazado."""
    tables.move_elsewhere(placed.saga_id, OrderStatus.CANCELADA_PAGO_RECHAZADO)
    tables.order_of(placed.saga_id).payment_declined_at = tables.now


async def test_orders_waiting_for_their_payment_count_against_the_customers_decline_limit(
        ) -> None:
    """A card tester's burst: no decline is heard yet when its orders arrive."""
    tables = OrderTables()
    settings = PedidosSettings(declines_per_customer=2, **LOOSE_WAITING)
    for _ in range(2):
        await _place(tables, settings, _body())
    refused = await _refused(tables, settings, _body())
    assert (refused.detail, refused.retry_after_s) == (too_many_waiting(settings), 1)
    # Another customer is not refused for it.
    assert (await _place(tables, settings, _body("c-2"))).created


async def test_orders_waiting_count_against_the_cards_decline_limit_whoever_the_customer(
        ) -> None:
    tables = OrderTables()
    settings = PedidosSettings(declines_per_card=2, **LOOSE_WAITING)
    await _place(tables, settings, _body("c-1", "tok_visa_shared"))
    await _place(tables, settings, _body("c-2", "tok_visa_shared"))
    await _refused(tables, settings, _body("c-3", "tok_visa_shared"))
    assert (await _place(tables, settings, _body("c-3"))).created, "another card is not refused"


async def test_a_decline_and_an_order_waiting_together_reach_the_limit() -> None:
    tables = OrderTables()
    settings = PedidosSettings(declines_per_customer=2, **LOOSE_WAITING)
    _decline(tables, await _place(tables, settings, _body()))
    await _place(tables, settings, _body())
    refused = await _refused(tables, settings, _body())
    assert refused.detail == too_many_waiting(settings)


async def test_an_order_whose_payment_was_decided_no_longer_waits() -> None:
    tables = OrderTables()
    settings = PedidosSettings(declines_per_customer=2, **LOOSE_WAITING)
    first = await _place(tables, settings, _body())
    await _place(tables, settings, _body())
    await _refused(tables, settings, _body())
    tables.move_elsewhere(first.saga_id, OrderStatus.PENDIENTE_ASIGNACION)  # paid
    assert (await _place(tables, settings, _body())).created


async def test_the_waiting_caps_hold_whatever_the_declines() -> None:
    tables = OrderTables()
    settings = PedidosSettings(waiting_orders_per_customer=3, waiting_orders_per_card=2)
    for _ in range(3):
        await _place(tables, settings, _body("c-1"))
    assert (await _refused(tables, settings, _body("c-1"))).detail == too_many_waiting(settings)
    for customer in ("c-2", "c-3"):
        await _place(tables, settings, _body(customer, "tok_visa_shared"))
    refused = await _refused(tables, settings, _body("c-4", "tok_visa_shared"))
    assert (refused.detail, refused.retry_after_s) == (too_many_waiting(settings), 1)
    assert "at most 3 of a customer and 2 of a card" in refused.detail


async def test_declines_alone_refuse_until_the_oldest_leaves_the_window() -> None:
    tables = OrderTables()
    settings = PedidosSettings(declines_per_customer=2, decline_window_s=600, **LOOSE_WAITING)
    _decline(tables, await _place(tables, settings, _body()))
    tables.advance(100)
    _decline(tables, await _place(tables, settings, _body()))
    tables.advance(50)
    refused = await _refused(tables, settings, _body())
    assert (refused.detail, refused.retry_after_s) == (TOO_MANY_DECLINES, 600 - 150)
    tables.advance(450)
    assert (await _place(tables, settings, _body())).created


async def test_the_limits_are_counted_holding_the_customers_and_the_cards_orders() -> None:
    tables = OrderTables()
    placed = await _place(tables, PedidosSettings(), _body("c-9", "tok_visa_9"))
    [(customer, card, _)] = tables.holds
    assert (customer, card) == ("c-9", FINGERPRINTS.card("tok_visa_9"))
    assert tables.orders[placed.order_id].card_fingerprint == card


async def test_a_request_sent_again_under_its_key_gets_its_order_over_the_limits() -> None:
    """Its answer was lost: its own order is one of those waiting."""
    tables = OrderTables()
    settings = PedidosSettings(waiting_orders_per_customer=1)
    body = _body()
    first = await _place(tables, settings, body, key="k-1")
    again = await _place(tables, settings, body, key="k-1")
    assert again == PlacedOrder(first.order_id, first.saga_id, "PENDIENTE_VALIDACION",
                                created=False)
    # A new request under a new key is still refused.
    uow, orders = unit(tables)
    with pytest.raises(OrderRefused):
        await place_order(uow, orders, _body(), Decimal("10.00"), "k-2", settings,
                          sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)


@pytest.mark.parametrize(("customer", "card", "refused"), [
    (Standing(0, 0, None), Standing(0, 0, None), None),
    (Standing(1, 0, None), Standing(1, 0, None), None),
    (Standing(3, 0, None), Standing(0, 0, None), "waiting"),  # the customer's decline limit
    (Standing(0, 0, None), Standing(4, 2, None), "waiting"),  # the card's, with declines
    (Standing(0, 0, None), Standing(5, 0, None), "waiting"),  # the card's waiting cap
    (Standing(0, 3, 42.2), Standing(0, 0, None), "declines"),
    (Standing(5, 3, 42.2), Standing(0, 6, 7.0), "declines"),  # declines first, latest leaving
])
def test_which_answer_a_standing_gets(customer: Standing, card: Standing,
                                      refused: str | None) -> None:
    settings = PedidosSettings(declines_per_customer=3, declines_per_card=6,
                               waiting_orders_per_customer=5, waiting_orders_per_card=5)
    answer = refusal(customer, card, settings)
    if refused is None:
        assert answer is None
    elif refused == "waiting":
        assert answer is not None
        assert (answer.detail, answer.retry_after_s) == (too_many_waiting(settings), 1)
    else:
        assert answer is not None
        assert (answer.detail, answer.retry_after_s) == (TOO_MANY_DECLINES, 43)


def test_the_window_a_decline_leaves_is_at_least_a_second() -> None:
    answer = refusal(Standing(0, 3, 0.01), Standing(0, 0, None),
                     PedidosSettings(declines_per_customer=3))
    assert answer is not None and answer.retry_after_s == 1

