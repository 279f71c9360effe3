"""The third of docs/standard.md#failure-scenarios: every query of a service answers in seconds.

inventario reaches PostgreSQL through the chaos suite's TCP proxy, which holds every request
for QUERY_LATENCY_S. Expected: the handler timeout abandons each attempt (rolled back), the
message is dead-lettered after its retries with that history, pedidos' step deadline cancels
the order, Prometheus fires the standard's alerts, and once the latency goes nothing is left
stuck: no deadlock, no lingering transaction, no dead process, and new sagas complete.

The standard's text says 10 s; the test uses seconds enough to exceed the handler timeout on
every attempt, so it runs in about a minute instead of several.

It reads PostgreSQL's own statistics (deadlocks, lingering transactions) and the dead letters in
inventario's outbox, which no public interface shows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from local_stack.settings import GATEWAY_PORT, KAFKA_BROKERS, REGISTRY_PORT
from netproxy.layout import service_routes
from netproxy.proxy import ProxySet
from saga_harness import config, db, stack
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.prometheus import running as prometheus
from saga_harness.waiting import wait_for

QUERY_LATENCY_S = 1.0
ORDERS = 6  # two dead letters each: DeadLetterQueueGrowing fires above 10
SLOW_INVENTARIO = {"SAGA_NETPROXY": "1", "SAGA_HANDLER_TIMEOUT_S": "1.5",
                   "SAGA_RETRY_MAX_ATTEMPTS": "3", "SAGA_RETRY_INITIAL_BACKOFF_S": "0.1"}
SHORT_VALIDATION = {"SAGA_ALLOW_UNSAFE_LIMITS": "1", "PEDIDOS_VALIDATION_TIMEOUT_S": "3",
                    "PEDIDOS_DEADLINE_SCAN_INTERVAL_S": "0.2"}


@pytest.fixture
async def inventario_behind_proxy(running_stack: None) -> AsyncIterator[ProxySet]:
    # Behind the proxy (SAGA_NETPROXY=1) a service reaches all of its dependencies through its
    # routes, the schema registry too (it waits for it before it is ready): every one is served.
    routes = service_routes("inventario", config.PG_PORT, GATEWAY_PORT, REGISTRY_PORT,
                            brokers=KAFKA_BROKERS)
    async with ProxySet(routes) as proxies:
        # In a thread: the proxy runs on this loop and the restart waits for inventario's
        # readiness, which needs the proxy to answer.
        await asyncio.to_thread(stack.restart, "inventario", SLOW_INVENTARIO)
        await asyncio.to_thread(stack.restart, "pedidos", SHORT_VALIDATION)
        try:
            yield proxies
        finally:
            proxies.clear()
            await asyncio.to_thread(stack.restart, "inventario")
            await asyncio.to_thread(stack.restart, "pedidos")


async def _deadlocks() -> int:
    return int(await db.fetchval("SELECT deadlocks FROM pg_stat_database "
                                 "WHERE datname = current_database()"))


@pytest.mark.timeout(600)  # about three minutes here: every dead letter takes seconds to write
async def test_every_query_slowed_by_seconds(saga: Saga,
                                             inventario_behind_proxy: ProxySet) -> None:
    proxies = inventario_behind_proxy
    deadlocks_before = await _deadlocks()
    sku = new_sku()
    await saga.set_stock(sku, 100)
    await saga.wait_caught_up("inventario")
    async with prometheus() as prom:
        dead_letters_before = await prom.value(
            'sum(dlq_messages_total{service="inventario"})') or 0.0
        assert not [a for a in await prom.firing()
                    if a["labels"]["alertname"] == "SagaFailureRateHigh"]

        proxies["inventario-postgres"].set(latency_s=QUERY_LATENCY_S)
        placed = [await saga.place(order_body([(sku, 1)])) for _ in range(ORDERS)]
        saga_ids = [p["saga_id"] for p in placed]

        # pedidos' step deadline fires: every order is cancelled for a timeout.
        for p in placed:
            order = await saga.wait_terminal(p["order_id"], timeout=20)
            assert order["status"] == "CANCELADA_TIMEOUT", order
            steps = [e for e in await saga.history(p["saga_id"])
                     if e["event_type"] == "StepTimedOut"]
            assert steps and steps[0]["detail"]["step"] == "validacion"

        # inventario's handler timeout fires on every attempt; after the retries, the request
        # and the cancellation that followed it go to the dead-letter topic with their history.
        async def dead_lettered() -> dict[str, int]:
            rows = await db.fetch(
                "SELECT event_type, count(*) AS n FROM inventario.outbox "
                "WHERE topic = 'inventario-dlq' AND saga_id = ANY($1::text[]) GROUP BY 1",
                saga_ids)
            return {r["event_type"]: r["n"] for r in rows}
        await wait_for(dead_lettered,
                       lambda n: n == {"OrdenSolicitada": ORDERS, "OrdenCancelada": ORDERS},
                       timeout=240, what="every slowed message dead-lettered", interval=0.5)
        letters = [json.loads(r["payload"]) for r in await db.fetch(
            "SELECT payload FROM inventario.outbox WHERE topic = 'inventario-dlq' "
            "AND saga_id = ANY($1::text[])", saga_ids)]
        for letter in letters:
            assert letter["reason"] == "retries_exhausted" and letter["attempt_count"] == 3
            assert all("HandlerTimedOut" in a["error"] for a in letter["attempts"]), letter["attempts"]

        # The standard's alerts fire, from what this run did (Prometheus started empty).
        def alert_names(alerts: list[dict]) -> set[tuple[str, str]]:
            return {(a["labels"]["alertname"], a["labels"].get("service", "")) for a in alerts}
        firing = await wait_for(
            prom.firing,
            lambda alerts: {("SagaFailureRateHigh", ""), ("DeadLetterQueueGrowing", "inventario")}
            <= alert_names(alerts),
            timeout=60, what="failure-rate and dead-letter alerts firing", interval=0.5)
        assert ("DeadLetterQueueGrowing", "inventario") in alert_names(firing)
        # The gauge behind it counts this run's dead letters (refreshed every few seconds).
        await wait_for(lambda: prom.value('sum(dlq_messages_total{service="inventario"})'),
                       lambda v: v is not None and v >= dead_letters_before + 2 * ORDERS,
                       timeout=30, what="dead-letter gauge grown by this run's letters")

    # Heal. Nothing is stuck behind the slow period.
    proxies.clear()
    assert stack.alive("inventario")

    async def lingering() -> int:
        return int(await db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = 'inventario_app' "
            "AND (state LIKE 'idle in transaction%' OR wait_event_type = 'Lock') "
            "AND now() - coalesce(xact_start, query_start) > interval '5 seconds'"))
    await wait_for(lingering, lambda n: n == 0, timeout=30, what="no lingering transaction")
    assert await _deadlocks() == deadlocks_before
    # No stock was taken for the cancelled orders, and a new saga completes.
    assert await saga.stock(sku) == 100
    after = await saga.place(order_body([(sku, 2)]))
    assert (await saga.wait_terminal(after["order_id"], timeout=30))["status"] == "COMPLETADA"
    assert await saga.stock(sku) == 98
