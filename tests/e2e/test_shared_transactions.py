"""Events that queue up for a service are handled in shared transactions, and every saga still
completes once: here inventario is paused while orders are placed, so their OrdenSolicitada
events wait in Kafka and reach its consumer together when it resumes (24 orders on 6
partitions: some partition holds several).

It reads pedidos' outbox, to know every OrdenSolicitada is in Kafka before inventario resumes,
and inventario's inbox and outbox, to count what was handled: none of them has an HTTP view."""

from __future__ import annotations

import asyncio

import httpx

from saga_harness import config, db
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import paused
from saga_harness.waiting import wait_for

ORDERS = 24


async def _shared(http: httpx.AsyncClient, url: str) -> tuple[float, float]:
    """Shared transactions committed, and the records they committed."""
    text = (await http.get(f"{url}/metrics")).text
    committed = records = 0.0
    for line in text.splitlines():
        if line.startswith("saga_shared_transactions_total{") and '"committed"' in line:
            committed += float(line.rsplit(" ", 1)[1])
        elif line.startswith("saga_shared_transaction_records_sum{"):
            records += float(line.rsplit(" ", 1)[1])
    return committed, records


async def test_queued_events_share_transactions_and_every_saga_completes_once(saga: Saga
                                                                               ) -> None:
    sku = new_sku("SKU-SHARED")
    await saga.set_stock(sku, 1000)
    await saga.wait_caught_up("inventario")
    before = await _shared(saga.http, config.INVENTARIO)

    with paused("inventario"):
        placed = await asyncio.gather(*(saga.place(order_body([(sku, 2)]))
                                        for _ in range(ORDERS)))
        saga_ids = [p["saga_id"] for p in placed]
        # Every OrdenSolicitada is in Kafka before inventario wakes up.
        await wait_for(lambda: db.fetchval(
            "SELECT count(*) FROM pedidos.outbox WHERE saga_id = ANY($1::text[]) "
            "AND event_type = 'OrdenSolicitada' AND status = 'published'", saga_ids),
            lambda n: n == ORDERS, timeout=30, what="every OrdenSolicitada published")

    orders = await asyncio.gather(*(saga.wait_terminal(p["order_id"], timeout=60)
                                    for p in placed))
    assert {o["status"] for o in orders} == {"COMPLETADA"}
    assert await saga.stock(sku) == 1000 - 2 * ORDERS
    # Each order checked once, its check and its event written once.
    assert await db.fetchval(
        "SELECT count(*) FROM inventario.processed_messages WHERE saga_id = ANY($1::text[]) "
        "AND event_type = 'OrdenSolicitada'", saga_ids) == ORDERS
    assert await db.fetchval(
        "SELECT count(*) FROM inventario.outbox WHERE saga_id = ANY($1::text[]) "
        "AND event_type = 'StockVerificado'", saga_ids) == ORDERS
    committed, records = await _shared(saga.http, config.INVENTARIO)
    assert committed > before[0], "no shared transaction: every record had one of its own"
    assert records - before[1] >= 2 * (committed - before[0])
