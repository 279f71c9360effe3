"""The second of docs/standard.md#failure-scenarios: Kafka stops while orders keep coming. The
outbox holds them, the gauge shows the backlog, and when Kafka is back every saga completes, its
events in order (the first copy of each; a later copy has the same message id)."""

from __future__ import annotations

import asyncio
import re

from saga_harness import config, stack
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.kafka import TopicReader, headers_of
from saga_harness.waiting import wait_for


async def _pending(saga: Saga) -> float:
    text = (await saga.http.get(f"{config.PEDIDOS}/metrics")).text
    m = re.search(r'^outbox_pending_messages\{service="pedidos"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else -1.0


async def test_orders_survive_a_broker_outage(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 100)
    async with TopicReader("order-events") as topic:
        stack.stop("kafka")
        try:
            placed = await asyncio.gather(*(saga.place(order_body([(sku, 1)]))
                                            for _ in range(8)))
            await wait_for(lambda: _pending(saga), lambda n: n >= 8, timeout=15,
                           what="outbox backlog visible in outbox_pending_messages")
            for p in placed:
                assert (await saga.order(p["order_id"]))["status"] == "PENDIENTE_VALIDACION"
        finally:
            stack.start("kafka")
        orders = await asyncio.gather(*(saga.wait_terminal(p["order_id"], timeout=60)
                                        for p in placed))
        assert {o["status"] for o in orders} == {"COMPLETADA"}
        await wait_for(lambda: _pending(saga), lambda n: n == 0, timeout=15,
                       what="outbox drained")
        for p in placed:
            await topic.wait_for(lambda r, sid=p["saga_id"]: headers_of(r).get("X-Saga-ID") == sid
                                 and headers_of(r)["X-Event-Type"] == "OrdenCompletada",
                                 timeout=30)
            records = [(headers_of(r)["X-Message-ID"], headers_of(r)["X-Event-Type"])
                       for r in topic.records if headers_of(r).get("X-Saga-ID") == p["saga_id"]]
            # Kafka out of reach for longer than SAGA_RELAY_STALL_S makes the relay give up its
            # lead and take it again (docs/operations.md#relay-leadership): a record its producer
            # held may then reach Kafka twice. Any such record is a copy (the same message id,
            # which the consumers' inbox drops), and the first copies are in the saga's order.
            first = list(dict.fromkeys(records))
            assert [event for _, event in first] == ["OrdenSolicitada", "OrdenCompletada"], records
            assert set(records) == set(first), records
    assert await saga.stock(sku) == 92
