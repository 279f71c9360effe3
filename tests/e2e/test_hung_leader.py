"""Two instances of every service; the pedidos instance whose relay leads is stopped (SIGSTOP)
for ``HANG_S`` while orders keep arriving through the other, then resumed.

A hung instance keeps its sockets open: nothing tells PostgreSQL or Kafka it is gone. Its
relay's lead must pass to the other instance when its lease runs out (``SAGA_RELAY_LEASE_S``,
5 s, and the standby's poll), and its consumer's partitions when the group's session times out
(10 s, and the rebalance). So every order placed during the hang must end within
``STEP_BOUND_S`` of being placed, the orders placed at the moment of the fault included: the
bound the relay's design is held to, from a fault to the next step of a saga done. When the
instance resumes, it does not lead (never two leaders, sampled from every /ready), and the
orders placed after it are completed as the others were.

Needs a stack started with SAGA_REPLICAS=2 (deploy/local/run-tests.sh runs it so, in its second
phase). HUNG_LEADER_TEST_SECONDS sets the hang (30 s; CI runs 20), HUNG_LEADER_TEST_RATE the
orders a second (5).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections import Counter

import httpx
import pytest

from saga_harness import db, replicas, stack
from saga_harness.clients import Endpoints, Saga, new_sku, order_body
from saga_harness.identity import StackAuth
from saga_harness.replicas import LeaderWatch
from saga_harness.waiting import wait_for

pytestmark = pytest.mark.replicas

HANG_S = float(os.environ.get("HUNG_LEADER_TEST_SECONDS", "30"))
RATE = float(os.environ.get("HUNG_LEADER_TEST_RATE", "5"))
STEP_BOUND_S = 15.0


def _require_two_replicas() -> None:
    if replicas.replicas() != 2:
        pytest.fail("test_hung_leader needs the stack started with SAGA_REPLICAS=2 and the same "
                    "variable in the tests' environment (deploy/local/run-tests.sh runs it in "
                    f"its second phase); SAGA_REPLICAS={os.environ.get('SAGA_REPLICAS')!r}")
    missing = [i.part for i in replicas.instances("pedidos") if not stack.alive(i.part)]
    assert not missing, f"SAGA_REPLICAS=2 but these instances are not running: {missing}"


async def _durations(order_ids: list[str]) -> dict[str, tuple[str, float | None]]:
    """Each order's status and the seconds from its saga's start to its end (None: not
    ended), by the database's clock."""
    rows = await db.fetch(
        "SELECT o.order_id::text AS order_id, o.status, "
        "extract(epoch FROM s.finished_at - s.started_at) AS took "
        "FROM pedidos.orders o JOIN pedidos.sagas s USING (saga_id) "
        "WHERE o.order_id = ANY($1::uuid[])", [uuid.UUID(o) for o in order_ids])
    return {r["order_id"]: (r["status"], None if r["took"] is None else float(r["took"]))
            for r in rows}


async def _place_during(saga: Saga, sku: str, seconds: float) -> list[str]:
    """Places an order every 1/RATE s for ``seconds``; returns their ids."""
    placed: list[str] = []

    async def one() -> None:
        placed.append((await saga.place(order_body([(sku, 1)])))["order_id"])

    t0 = time.monotonic()
    tasks = []
    for n in range(int(seconds * RATE)):
        await asyncio.sleep(max(0.0, t0 + n / RATE - time.monotonic()))
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    return placed


async def test_orders_end_within_the_bound_while_the_relays_leader_is_hung(
        running_stack: None) -> None:
    _require_two_replicas()
    watch = LeaderWatch(interval_s=0.2)
    async with httpx.AsyncClient(timeout=10, auth=StackAuth()) as http, watch.watching():
        leading = await wait_for(lambda: replicas.leaders(http, "pedidos"),
                                 lambda found: len(found) == 1, timeout=30,
                                 what="one relay leader of pedidos")
        hung = leading[0]
        survivor = next(i for i in replicas.instances("pedidos") if i != hung)
        saga = Saga(http, Endpoints(pedidos=survivor.url))
        sku = new_sku()
        await saga.set_stock(sku, 100_000)
        warm = await saga.place(order_body([(sku, 1)]))
        assert (await saga.wait_terminal(warm["order_id"], 30))["status"] == "COMPLETADA"

        stack.signal_part(hung.part, signal.SIGSTOP)
        try:
            during = await _place_during(saga, sku, HANG_S)
            # Every order placed during the hang ends, each within the bound, while the hang
            # lasts or soon after.
            ended = await wait_for(lambda: _durations(during),
                                   lambda d: len(d) == len(during)
                                   and all(took is not None for _, took in d.values()),
                                   timeout=STEP_BOUND_S + 10, interval=0.5,
                                   what="every order placed during the hang ended")
        finally:
            stack.signal_part(hung.part, signal.SIGCONT)

        after = await _place_during(saga, sku, 3)
        for order_id in after:
            await saga.wait_terminal(order_id, 30)
        await wait_for(lambda: replicas.leaders(http, "pedidos"),
                       lambda found: [i.part for i in found] == [survivor.part], timeout=10,
                       what="the survivor leads, the resumed instance stands by")

    took = sorted(t for _, t in ended.values() if t is not None)
    print(f"{len(during)} orders placed during a {HANG_S:.0f}s hang of {hung.part}: "
          f"{Counter(s for s, _ in ended.values())}; slowest {took[-1]:.2f}s, "
          f"median {took[len(took) // 2]:.2f}s")
    assert {s for s, _ in ended.values()} == {"COMPLETADA"}
    slow = {o: t for o, (_, t) in ended.items() if t is not None and t > STEP_BOUND_S}
    assert not slow, f"{len(slow)} orders took longer than {STEP_BOUND_S}s: {slow}"
    history = watch.history["pedidos"]
    assert history.two_leaders() == [], "two relay leaders of pedidos at once"
