"""The standard's three tracing headers on a saga's first message (Part I §7.1), read from the
real order-events topic: OrdenSolicitada's parent span is the span of the HTTP request that
placed the order, the one the saga's row and pedidos' log line for that request name, and the
next step hangs from OrdenSolicitada in turn."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from harness import db, stack
from harness.clients import Saga, new_sku, order_body
from harness.kafka import TopicReader, headers_of
from harness.waiting import wait_for

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
