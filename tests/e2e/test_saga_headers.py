"""The standard's three tracing headers on the messages that do not follow another message
(docs/standard.md#saga-and-span-ids), read from the real order-events topic: OrdenSolicitada's
parent span is the span of the HTTP request that placed the order, the one the saga's row and
pedidos' log line for that request name, and the next step hangs from OrdenSolicitada in turn; an
OrdenCancelada sent for a cancel request hangs from that request.

It reads the request's span id from pedidos' saga row, the one place that keeps it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from saga_harness import config, db, stack
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import paused
from saga_harness.kafka import TopicReader, headers_of
from saga_harness.waiting import current, wait_for

PEDIDOS_LOG = stack.STATE / "logs" / "pedidos.log"


def _of_saga(saga_id: str, event_type: str) -> Any:
    def accept(record: Any) -> bool:
        headers = headers_of(record)
        return headers.get("X-Saga-ID") == saga_id and headers.get("X-Event-Type") == event_type
    return accept


def _accepted_line(log: Path, offset: int, saga_id: str) -> dict[str, Any] | None:
    """pedidos' log line for the request that placed the saga, among the lines written since
    ``offset``."""
    with log.open("rb") as f:
        f.seek(offset)
        for line in f.read().decode(errors="replace").splitlines():
            if '"order accepted"' in line and saga_id in line:
                doc: dict[str, Any] = json.loads(line)
                if doc.get("saga_id") == saga_id:
                    return doc
    return None


async def test_orden_solicitada_carries_the_three_headers_its_parent_the_request(
        saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 1)
    logged_before = PEDIDOS_LOG.stat().st_size
    async with TopicReader("order-events") as orders, \
            TopicReader("inventory-events") as inventory:
        placed = await saga.place(order_body([(sku, 1)]))
        first = await orders.wait_for(_of_saga(placed["saga_id"], "OrdenSolicitada"))
        second = await inventory.wait_for(_of_saga(placed["saga_id"], "StockVerificado"))

    headers, envelope = headers_of(first), json.loads(first.value)
    assert headers["X-Saga-ID"] == envelope["saga_id"] == placed["saga_id"]
    span, parent = headers["X-Span-ID"], headers.get("X-Parent-Span-ID")
    assert parent, f"OrdenSolicitada has no X-Parent-Span-ID: {headers}"
    assert uuid.UUID(span) and uuid.UUID(parent) and parent != span
    assert (span, parent) == (envelope["span_id"], envelope["parent_span_id"])

    # The parent is the request's span: the saga's row keeps it, and the request's log line
    # (a span of the hierarchy with no parent of its own) is that span's.
    stored = await db.fetchval(
        "SELECT context->>'request_span_id' FROM pedidos.sagas WHERE saga_id = $1",
        uuid.UUID(placed["saga_id"]))
    assert stored == parent

    async def logged() -> dict[str, Any] | None:
        return _accepted_line(PEDIDOS_LOG, logged_before, placed["saga_id"])

    line = await wait_for(logged, lambda doc: doc is not None, timeout=10,
                          what="pedidos logged the request that placed the order")
    assert line is not None
    assert (line["span_id"], line["parent_span_id"]) == (parent, None)

    # The hierarchy goes on from there: the next step's parent is OrdenSolicitada's span.
    assert headers_of(second)["X-Parent-Span-ID"] == span


async def test_orden_cancelada_from_the_api_hangs_from_the_cancel_request(saga: Saga) -> None:
    """A cancellation is not a message's consequence: its OrdenCancelada's parent is the span
    of the request that cancelled, named by pedidos' log line for that request."""
    sku = new_sku()
    await saga.set_stock(sku, 0)  # the saga stops at validation: nothing else moves it
    logged_before = PEDIDOS_LOG.stat().st_size
    async with TopicReader("order-events") as orders:
        with paused("inventario"):
            placed = await saga.place(order_body([(sku, 1)]))
            answer = await saga.http.post(f"{config.PEDIDOS}/sagas/{placed['saga_id']}/cancel",
                                          json={"reason": "test"})
            assert answer.status_code == 202, answer.text
        cancelled = await orders.wait_for(_of_saga(placed["saga_id"], "OrdenCancelada"))
    headers = headers_of(cancelled)
    parent = headers.get("X-Parent-Span-ID")
    assert parent and uuid.UUID(parent) and parent != headers["X-Span-ID"], headers

    def cancel_line() -> dict[str, Any] | None:
        with PEDIDOS_LOG.open("rb") as f:
            f.seek(logged_before)
            for line in f.read().decode(errors="replace").splitlines():
                if '"saga cancelled"' in line and placed["saga_id"] in line:
                    return json.loads(line)  # type: ignore[no-any-return]
        return None

    line = await wait_for(lambda: current(cancel_line()), lambda doc: doc is not None,
                          timeout=10, what="pedidos logged the cancel request")
    assert line is not None and line["span_id"] == parent
