"""Operator actions racing the running saga, each interleaving forced with an explicit barrier:
what an operator does must never make the saga charge a card it would not have charged, nor
leave the audit saying something other than what happened."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from saga_harness import config, db
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import row_locked
from saga_harness.identity import bearer, token
from saga_harness.waiting import wait_for


@pytest.fixture
async def http(running_stack: None) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def test_a_retry_while_the_stock_answer_is_on_its_way_never_charges_an_order_without_stock(
        saga: Saga, http: httpx.AsyncClient) -> None:
    """The validation step is retried while inventario's first answer (StockNoDisponible) is on
    its way to pedidos, and the product is restocked meanwhile. inventario answers the second
    OrdenSolicitada as its check answered the first: a StockVerificado there would have pagos
    charge the card for an order that ends cancelled (inventario refusing that payment as one
    its check never asked for)."""
    sku, who = new_sku(), f"ops-{uuid.uuid4().hex[:8]}"
    await saga.set_stock(sku, 0)
    # pedidos' consumer cannot commit while this lock is held: every message it handles
    # inserts its inbox row in the statement that moves the saga, and that statement takes the
    # table's lock before it touches a row. Its API (orders, the retry) and relay go on.
    async with row_locked("SELECT 1") as conn:
        await conn.execute("LOCK TABLE pedidos.processed_messages IN EXCLUSIVE MODE")
        placed = await saga.place(order_body([(sku, 1)]))
        saga_id = placed["saga_id"]
        await wait_for(lambda: db.fetchval("SELECT result FROM inventario.stock_checks "
                                           "WHERE saga_id = $1", saga_id),
                       lambda r: r == "unavailable", timeout=15, what="first check: no stock")
        await saga.set_stock(sku, 5)
        retried = await http.post(f"{config.PEDIDOS}/sagas/{saga_id}/retry",
                                  json={"reason": "validation looks stuck"},
                                  headers=bearer(token(who, ("operator",))))
        assert retried.status_code == 202, retried.text
        message_id = retried.json()["message_id"]
        await wait_for(lambda: db.fetchval("SELECT count(*) FROM inventario.processed_messages "
                                           "WHERE message_id = $1", message_id),
                       lambda n: n == 1, timeout=15, what="the retried request handled")
        answers = [r["event_type"] for r in await db.fetch(
            "SELECT event_type FROM inventario.outbox WHERE saga_id = $1 "
            "AND topic = 'inventory-events' ORDER BY id", saga_id)]
        # pagos hears inventory-events as they are published: give it the time a charge takes.
        if "StockVerificado" in answers:
            await wait_for(lambda: saga.payments(saga_id), lambda ps: bool(ps), timeout=15,
                           what="pagos heard the StockVerificado")
    # pedidos takes whichever answer it hears first: StockNoDisponible (CANCELADA_SIN_STOCK), or
    # the PagoExitoso of the second answer's charge, which inventario then refuses to allocate
    # for (its check says unavailable), so the allocation's deadline cancels the order.
    order = await saga.wait_terminal(placed["order_id"], timeout=45)
    # The charge, if one was made, is refunded on the cancellation: wait for that, then count.
    await saga.wait_no_net_charge(saga_id, timeout=30)
    net, charges, refunds = await saga.money_of(saga_id)
    assert charges == 0, (f"an order cancelled for lack of stock was charged {charges} time(s) "
                          f"(refunded {refunds}, net {net}); inventario answered {answers}, the order ended "
                          f"{order['status']}")
    # The retry is answered again, as the check answered first.
    assert answers == ["StockNoDisponible", "StockNoDisponible"], (
        f"inventario answered one stock check twice, differently: {answers}")
