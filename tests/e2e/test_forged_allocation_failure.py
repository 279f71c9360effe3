"""A ``FalloAsignacion`` for a saga whose stock inventario already allocated refunds nothing.

inventario answers each paid saga once: ``StockAsignado`` or ``FalloAsignacion``. A second
answer that contradicts the first can only be a bug or a forgery by a process holding
inventario's Kafka credentials (the contract checks of the consumer and Kafka's ACLs let it
through: topic, producer and key are all inventario's). Without pagos' guard it would refund a
customer who keeps the goods: pedidos leaves a COMPLETADA order as it is. Here it is written,
as inventario, for a real saga that completed: the payment stays captured, the gateway's ledger
shows no refund, and pagos counts the refusal in ``saga_refund_refused_total``, which pages
(``RefundRefused``)."""

from __future__ import annotations

from decimal import Decimal

from saga_harness import config, db
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.kafka import envelope, produce
from saga_harness.waiting import wait_for


async def _refused(saga: Saga, reason: str) -> float:
    """pagos' ``saga_refund_refused_total{reason}``, from its /metrics."""
    text = (await saga.http.get(f"{config.PAGOS}/metrics")).text
    for line in text.splitlines():
        if (line.startswith("saga_refund_refused_total{") and f'reason="{reason}"' in line
                and 'service="pagos"' in line):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"pagos exposes no saga_refund_refused_total{{reason={reason!r}}}")


async def test_an_allocation_failure_written_as_inventario_for_a_completed_saga_refunds_nothing(
        saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    placed = await saga.place(order_body([(sku, 2)], price="5.00"))
    saga_id, order_id = placed["saga_id"], placed["order_id"]
    await saga.wait_status(order_id, "COMPLETADA", timeout=30)
    # pagos consumes the StockAsignado on its own: wait until it recorded the allocation.
    await wait_for(lambda: db.fetchval("SELECT stock_allocated_at IS NOT NULL FROM "
                                       "pagos.payments WHERE saga_id = $1", saga_id),
                   lambda allocated: allocated is True, timeout=15,
                   what="pagos recorded the saga's allocation")
    before = await _refused(saga, "stock_allocated")

    forged = envelope("FalloAsignacion", {
        "order_id": order_id, "reason": "stock_agotado",
        "unavailable": [{"sku": sku, "requested": 2, "available": 0}]},
        saga_id=saga_id, source="inventario")
    await produce("inventory-events", forged, key=saga_id, principal="inventario")
    # pagos handled it (its inbox holds it: processed, not dead-lettered, nothing to retry).
    await wait_for(lambda: db.fetchval("SELECT status FROM pagos.processed_messages "
                                       "WHERE message_id = $1", forged["message_id"]),
                   lambda status: status == "processed", timeout=15,
                   what="pagos handled the forged FalloAsignacion")

    # At least once: a record fetched again (a retry, a rebalance) is counted again.
    assert await _refused(saga, "stock_allocated") >= before + 1
    # A refund would have moved the payment in the transaction that recorded the message.
    payment = (await saga.payments(saga_id))[0]
    assert payment["status"] == "CAPTURED", payment
    assert await saga.money_of(saga_id) == (Decimal("10.00"), 1, 0), "no refund in the ledger"
    assert (await saga.order(order_id))["status"] == "COMPLETADA"
