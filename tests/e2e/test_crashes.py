"""The first of docs/standard.md#failure-scenarios and the relay's crash window: SIGKILL between a
durable commit and its acknowledgement, then restart. The saga goes on and nothing happens twice.

It reads inventario's and pedidos' tables to see what was committed before the kill and that the
inbox absorbed the redelivery: neither shows through HTTP or Kafka."""

from __future__ import annotations

from saga_harness import db, fault_plugin, stack
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.kafka import TopicReader, headers_of
from saga_harness.waiting import wait_for


async def _wait_dead(part: str) -> None:
    async def probe() -> bool:
        return stack.alive(part)
    await wait_for(probe, lambda up: not up, timeout=15, what=f"{part} killed itself")


async def test_consumer_killed_after_commit_before_offset_commit(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 10)
    # Nothing older may reach the fault: it must hit this test's own PagoExitoso.
    await saga.wait_caught_up("inventario")
    stack.restart("inventario", fault_plugin.env(crash_after_commit="PagoExitoso"))
    try:
        placed = await saga.place(order_body([(sku, 3)]))
        await _wait_dead("inventario")
        # The allocation and its outbox row were committed before the kill.
        assert await db.fetchval("SELECT quantity FROM inventario.products WHERE sku = $1",
                                 sku) == 7
        assert await db.fetchval("SELECT count(*) FROM inventario.outbox WHERE saga_id = $1 "
                                 "AND event_type = 'StockAsignado'", placed["saga_id"]) == 1
    finally:
        stack.restart("inventario")
    order = await saga.wait_terminal(placed["order_id"], timeout=30)
    assert order["status"] == "COMPLETADA"
    # PagoExitoso was delivered again after the restart and absorbed by the inbox.
    assert await saga.stock(sku) == 7
    assert await db.fetchval("SELECT count(*) FROM inventario.processed_messages "
                             "WHERE saga_id = $1 AND event_type = 'PagoExitoso'",
                             placed["saga_id"]) == 1


async def test_relay_killed_after_publish_before_marking(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 10)
    await saga.wait_caught_up("inventario")
    async with TopicReader("inventory-events") as topic:
        stack.restart("inventario", fault_plugin.env(crash_after_publish="StockAsignado"))
        try:
            placed = await saga.place(order_body([(sku, 2)]))
            await _wait_dead("inventario")
        finally:
            stack.restart("inventario")
        order = await saga.wait_terminal(placed["order_id"], timeout=30)
        assert order["status"] == "COMPLETADA"

        def assigned(r: object) -> bool:
            h = headers_of(r)
            return h.get("X-Saga-ID") == placed["saga_id"] and h["X-Event-Type"] == "StockAsignado"

        first = await topic.wait_for(assigned)
        again = await topic.wait_for(lambda r: assigned(r) and r is not first)
    # Published twice (same message id), applied once by pedidos.
    assert headers_of(first)["X-Message-ID"] == headers_of(again)["X-Message-ID"]
    message_id = headers_of(first)["X-Message-ID"]
    assert await db.fetchval("SELECT count(*) FROM pedidos.processed_messages "
                             "WHERE message_id = $1", message_id) == 1
    transitions = [e for e in await saga.history(placed["saga_id"])
                   if e["event_type"] == "StockAsignado"]
    assert len(transitions) == 1
    assert await saga.stock(sku) == 8
