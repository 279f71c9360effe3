"""A three-broker Kafka (replication factor 3, min.insync.replicas=2) losing brokers
under 20 orders a second.

First one broker is SIGKILLed and restarted while orders keep coming: every order answered 202
reaches a terminal state. Then two are SIGKILLed at once: the broker left is below
min.insync.replicas (and the controller quorum of three is lost), so no send is acknowledged;
orders are still accepted over HTTP, stay PENDIENTE_VALIDACION, and pedidos' outbox grows by
one row each. When the brokers return, every saga ends, and the chaos checker finds every
invariant kept: no acknowledged order lost, no stock moved or money charged twice.

Needs a stack started with SAGA_KAFKA_BROKERS=3 (deploy/local/run-tests.sh runs it so, in its
second phase). BROKER_TEST_SECONDS is the first phase's load (30 s: 600 orders; CI runs 12:
240); the second phase's brokers stay down for half as long.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter

import httpx
import pytest

from chaos import scenario
from chaos.scenario import OrderLoad
from saga_harness import db, replicas, stack
from saga_harness.identity import StackAuth
from saga_harness.waiting import wait_for

pytestmark = pytest.mark.brokers3

RATE = 20.0
SECONDS = float(os.environ.get("BROKER_TEST_SECONDS", "30"))
BROKERS = ("kafka", "kafka-2", "kafka-3")


def _require_three_brokers() -> None:
    if replicas.kafka_brokers() != 3:
        pytest.fail("test_broker_failure needs the stack started with SAGA_KAFKA_BROKERS=3 and "
                    "the same variable in the tests' environment (deploy/local/run-tests.sh "
                    "runs it in its second phase); SAGA_KAFKA_BROKERS="
                    f"{os.environ.get('SAGA_KAFKA_BROKERS')!r}")
    missing = [b for b in BROKERS if not stack.alive(b)]
    assert not missing, f"SAGA_KAFKA_BROKERS=3 but these brokers are not running: {missing}"


async def _pedidos_backlog() -> int:
    return int(await db.fetchval("SELECT count(*) FROM pedidos.outbox WHERE status = 'pending'"))


async def test_no_acknowledged_order_is_lost_when_brokers_die(running_stack: None) -> None:
    _require_three_brokers()
    orders = int(RATE * SECONDS)
    async with httpx.AsyncClient(timeout=10, auth=StackAuth()) as http:
        load = await OrderLoad.stocked(http, seed=3, skus=4, units=max(10, orders // 8))

        # One broker dies a quarter of the way through and is restarted half way.
        await load.send(orders // 4, RATE)
        stack.signal_part("kafka-2", signal.SIGKILL)
        await load.send(orders // 4, RATE)
        await asyncio.gather(asyncio.to_thread(stack.start, "kafka-2"),
                             load.send(orders - load.sent, RATE))
        await load.finish()
        first = list(load.acknowledged)
        assert first, "orders were acknowledged"
        await wait_for(lambda: scenario.busy(first), lambda n: n == 0, timeout=180,
                       interval=0.5, what="every order acknowledged around one broker's death "
                                          "ended, its payment settled")

        # Two brokers die at once: nothing can be acknowledged by Kafka any more.
        for broker in ("kafka-3", "kafka-2"):
            stack.signal_part(broker, signal.SIGKILL)
        at_kill = await _pedidos_backlog()
        # At most 15 s of orders: the first must still be PENDIENTE_VALIDACION when looked at,
        # well within pedidos' validation step deadline (30 s).
        sending = asyncio.create_task(load.send(int(RATE * min(SECONDS / 2, 15)), RATE))
        try:
            await wait_for(_pedidos_backlog, lambda n: n >= at_kill + 20, timeout=60,
                           interval=0.2, what="pedidos' outbox growing with two brokers down")
            # The relays were blocked before these orders were committed.
            mark = len(load.acknowledged)
            await sending
            await load.finish()
        except BaseException:
            sending.cancel()
            raise
        blocked = load.acknowledged[mark:]
        assert blocked, "orders were accepted over HTTP with two brokers down"
        statuses = Counter(r["status"] for r in await db.fetch(
            "SELECT status FROM pedidos.orders WHERE order_id = ANY($1::uuid[])", blocked))
        assert statuses == Counter({"PENDIENTE_VALIDACION": len(blocked)}), statuses
        # Each one's OrdenSolicitada waits in the outbox.
        waiting = await db.fetchval(
            "SELECT count(DISTINCT o.order_id) FROM pedidos.orders o JOIN pedidos.outbox x "
            "ON x.saga_id = o.saga_id::text WHERE o.order_id = ANY($1::uuid[]) "
            "AND x.status = 'pending'", blocked)
        assert waiting == len(blocked), f"{len(blocked)} orders, {waiting} waiting in the outbox"
        for broker in ("kafka-2", "kafka-3"):
            assert not stack.alive(broker), f"{broker} stayed down"

        # They return (starting one starts every broker that is down).
        stack.start("kafka-3")
        snap, violations = await scenario.verdict(load, quiesce_s=300)

    print(f"{load.sent} orders sent, {len(load.acknowledged)} acknowledged, {len(blocked)} "
          f"while two brokers were down; outcomes "
          f"{Counter(o.status for o in snap.orders.values())}")
    assert violations == [], "\n".join(map(str, violations))
    assert set(load.acknowledged) <= set(snap.orders)
    keys = Counter(c["idempotency_key"] for c in snap.charges if c["status"] == "succeeded")
    assert [k for k, n in keys.items() if n > 1] == []
