"""Events that break their contract (docs/standard.md#a-broker-between-the-steps: each event type
has one producer and one topic) are dead-lettered by every service that handles them, and change
nothing.

In a choreographed saga the events are the authority: without this, any process that reaches the
broker could write a ``PagoExitoso`` and get goods allocated unpaid. Here such forgeries are
written for a real saga that waits for its payment: pagos is paused meanwhile, so that no genuine
``PagoExitoso`` can exist for the saga and whatever moved it would be a forgery. It reads
inventario's allocations, which have no HTTP view."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from saga_harness import db
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import paused
from saga_harness.kafka import TopicReader, envelope, headers_of, produce


@dataclass(frozen=True)
class Forgery:
    what: str
    topic: str
    value: dict[str, Any]
    key: str
    read_by: frozenset[str]
    """The services that handle PagoExitoso and read ``topic``: each must dead-letter it."""


def _paid(saga_id: str, order_id: str, source: str) -> dict[str, Any]:
    """A PagoExitoso its schema accepts, for the saga's very amount."""
    return envelope("PagoExitoso", {"order_id": order_id, "payment_id": str(uuid.uuid4()),
                                    "charge_id": "ch_forged", "amount": "10.00",
                                    "currency": "USD"}, saga_id=saga_id, source=source)


def _forgeries(saga_id: str, order_id: str) -> list[Forgery]:
    both = frozenset({"inventario", "pedidos"})
    return [
        # On its own topic, keyed by its saga, but not from pagos.
        Forgery("another producer", "payment-events", _paid(saga_id, order_id, "inventario"),
                saga_id, both),
        # From pagos, as its envelope says, but on a topic pagos never writes to: inventario
        # reads order-events, pedidos reads inventory-events.
        Forgery("order-events", "order-events", _paid(saga_id, order_id, "pagos"), saga_id,
                frozenset({"inventario"})),
        Forgery("inventory-events", "inventory-events", _paid(saga_id, order_id, "pagos"),
                saga_id, frozenset({"pedidos"})),
        # Keyed otherwise than by its saga: another partition, out of the saga's order.
        Forgery("another key", "payment-events", _paid(saga_id, order_id, "pagos"),
                str(uuid.uuid4()), both),
    ]


def _letter_of(message_id: str) -> Any:
    def accept(record: Any) -> bool:
        return bool(json.loads(record.value)["original"]["message_id"] == message_id)
    return accept


async def _allocation(saga_id: str) -> str | None:
    return await db.fetchval("SELECT status FROM inventario.allocations WHERE saga_id = $1",
                             saga_id)


async def test_a_forged_payment_is_dead_lettered_everywhere_and_changes_nothing(
        saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    with paused("pagos"):
        placed = await saga.place(order_body([(sku, 2)], price="5.00"))
        saga_id, order_id = placed["saga_id"], placed["order_id"]
        await saga.wait_status(order_id, "PENDIENTE_PAGO")
        forgeries = _forgeries(saga_id, order_id)
        async with TopicReader("inventario-dlq") as inventario_dlq, \
                TopicReader("pedidos-dlq") as pedidos_dlq:
            for forgery in forgeries:
                await produce(forgery.topic, forgery.value, key=forgery.key)
            readers = {"inventario": inventario_dlq, "pedidos": pedidos_dlq}
            for forgery in forgeries:
                for service in sorted(forgery.read_by):
                    record = await readers[service].wait_for(
                        _letter_of(forgery.value["message_id"]))
                    letter = json.loads(record.value)
                    assert letter["reason"] == "contract_violation", (forgery.what, letter)
                    assert letter["consumer_service"] == service
                    assert letter["original"]["topic"] == forgery.topic
                    assert headers_of(record)["X-DLQ-Error-Class"] == "contract_violation"
                    error = letter["attempts"][0]["error"]
                    assert "PagoExitoso comes on topic 'payment-events' from 'pagos'" in error
        # Every forgery has been decided on by every service that reads it: none moved the saga.
        order = await saga.order(order_id)
        assert order["status"] == "PENDIENTE_PAGO", order
        assert await saga.stock(sku) == 5
        assert await _allocation(saga_id) is None
        history = [e["event_type"] for e in await saga.history(saga_id)]
        assert "PagoExitoso" not in history, history
    # pagos goes on: the genuine payment completes the saga, which takes its stock once.
    await saga.wait_status(order_id, "COMPLETADA", timeout=30)
    assert await saga.stock(sku) == 3
    assert await _allocation(saga_id) == "ALLOCATED"
    assert await saga.money_of(saga_id) == (Decimal("10.00"), 1, 0)
