"""An instance cut off from its database (a black hole: the bytes held both ways, the
connections left open, no FIN or RST) gives its partitions to an instance that can reach it,
within a bound, and takes them back once the database answers again
(``sagakit.store.reachability``, ``sagakit.consumer.loop``).

Each test reaches PostgreSQL through a route of the project's TCP proxy (``tools/netproxy``,
run here) that it blackholes. Without the consumer leaving its group, a record on a partition
of the cut-off consumer waits for the fault's end: its handler's statement hangs until the
connection's command timeout (30 s) and is then retried for as long as the database is away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer
from sqlalchemy.ext.asyncio import AsyncEngine

from netproxy.proxy import ProxySet
from saga_contracts.events.orders import OrdenCompletada
from saga_harness import config
from saga_harness.kafka import envelope
from saga_harness.ports import free_port
from saga_harness.scratch import scratch_outbox
from saga_harness.waiting import wait_for
from sagakit.consumer import EventConsumer, Origin, Subscription
from sagakit.message import Message
from sagakit.settings import MessagingSettings
from sagakit.store.database import build_engine
from sagakit.store.reachability import Reachability
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SERVICE = "reachtest"
TOPIC = "reachability-test-events"
PARTITIONS = 4
LOST_AFTER_S = 5.0
# The probe's own timing: one probe in flight when the answers stop (its timeout), and the
# next one a second later at most.
PROBE_S = 2.0 + 1.0
# The group's part once the cut-off member has left: the other member hears of the rebalance
# at its next heartbeat (every 3 s), rejoins and is given every partition.
REBALANCE_S = 3.0 + 2.0
# Processes sharing two cores, this test's own fetch.
SLACK_S = 2.0


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with scratch_outbox(SERVICE, TOPIC, PARTITIONS, fresh_topic=True) as made:
        yield made


@contextlib.asynccontextmanager
async def _route() -> AsyncIterator[tuple[ProxySet, str]]:
    port = free_port()
    async with ProxySet({"cut-postgres": (port, "127.0.0.1", config.PG_PORT)}) as proxies:
        try:
            yield proxies, config.admin_url_through(port)
        finally:
            proxies.clear()


async def test_a_blackholed_database_is_lost_within_the_bound_and_regained(
        running_stack: None) -> None:
    async with _route() as (proxies, url):
        watch = Reachability(url, SERVICE, lost_after_s=LOST_AFTER_S)
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop))
        try:
            await asyncio.sleep(0)
            assert not watch.lost.is_set()
            # Answers come while the route is open: nothing is lost in twice the bound.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(watch.lost.wait(), 2 * LOST_AFTER_S)

            proxies["cut-postgres"].set(blackhole=True)
            cut_at = time.monotonic()
            await asyncio.wait_for(watch.lost.wait(), LOST_AFTER_S + PROBE_S + SLACK_S)
            lost_s = time.monotonic() - cut_at
            assert lost_s >= LOST_AFTER_S - 1.0, f"lost after {lost_s:.1f}s: too soon"
            print(f"lost {lost_s:.2f}s after the cut (bound {LOST_AFTER_S + PROBE_S}s)")

            proxies["cut-postgres"].set(blackhole=False)
            healed_at = time.monotonic()
            await asyncio.wait_for(watch.regained.wait(), PROBE_S + SLACK_S)
            assert not watch.lost.is_set()
            print(f"regained {time.monotonic() - healed_at:.2f}s after the heal")
        finally:
            stop.set()
            await task


class _Member:
    """An EventConsumer of the scratch group whose handlings are recorded by name."""

    def __init__(self, name: str, engine: AsyncEngine, tables: MessagingTables,
                 handled: dict[str, str], reachability: Reachability | None) -> None:
        async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
            await uow.commit()
            handled.setdefault(event.saga_id, name)

        self.reachability = reachability
        self.consumer = EventConsumer(
            service=SERVICE, topics=[TOPIC],
            subscriptions=[Subscription(OrdenCompletada, handler)],
            uow_factory=lambda **kw: UnitOfWork(engine, tables, SERVICE, **kw),
            settings=MessagingSettings(**config.kafka_fields()),
            origins={"OrdenCompletada": Origin(TOPIC, "pedidos")}, reachability=reachability)
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.tasks.append(asyncio.create_task(self.consumer.run(self.stop)))
        if self.reachability is not None:
            self.tasks.append(asyncio.create_task(self.reachability.run(self.stop)))

    def partitions(self) -> set[int]:
        kafka = self.consumer.kafka
        return {tp.partition for tp in kafka.assignment()} if kafka is not None else set()

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(asyncio.gather(*self.tasks, return_exceptions=True), 30)


async def test_a_consumer_cut_off_from_its_database_gives_its_partitions_away(
        scratch: tuple[AsyncEngine, MessagingTables]) -> None:
    engine, tables = scratch
    handled: dict[str, str] = {}
    producer = AIOKafkaProducer(**config.kafka_client(), acks="all")
    await producer.start()

    async def send_to_every_partition() -> list[str]:
        sagas = [str(uuid.uuid4()) for _ in range(PARTITIONS)]
        for p, saga_id in enumerate(sagas):
            await producer.send_and_wait(TOPIC, json.dumps(envelope(
                "OrdenCompletada", {"order_id": str(uuid.uuid4()), "total_amount": "1.00",
                                    "currency": "USD"}, saga_id=saga_id, source="pedidos"
            )).encode(), key=saga_id.encode(), partition=p)
        return sagas

    async def all_handled(sagas: list[str]) -> None:
        async def count() -> int:
            return sum(s in handled for s in sagas)
        await wait_for(count, lambda n: n == len(sagas),
                       timeout=LOST_AFTER_S + PROBE_S + REBALANCE_S + SLACK_S,
                       what="a record on every partition handled", interval=0.1)

    async with _route() as (proxies, url):
        cut_engine = build_engine(url, f"{SERVICE}-cut", pool_size=4)
        cut = _Member("cut", cut_engine, tables, handled,
                      Reachability(url, SERVICE, lost_after_s=LOST_AFTER_S))
        other = _Member("other", engine, tables, handled, None)
        try:
            cut.start()
            await asyncio.wait_for(cut.consumer.assigned.wait(), 30)
            other.start()
            await wait_for(lambda: _now(cut.partitions(), other.partitions()),
                           lambda owned: all(owned), timeout=30,
                           what="both members own partitions")
            await all_handled(await send_to_every_partition())

            proxies["cut-postgres"].set(blackhole=True)
            cut_at = time.monotonic()
            sagas = await send_to_every_partition()
            await all_handled(sagas)
            took = time.monotonic() - cut_at
            print(f"every partition's record handled {took:.2f}s after the cut")
            assert {handled[s] for s in sagas} == {"other"}
            assert cut.partitions() == set()

            proxies["cut-postgres"].set(blackhole=False)
            await wait_for(lambda: _now(cut.partitions()), lambda owned: bool(owned[0]),
                           timeout=PROBE_S + REBALANCE_S + 10 + SLACK_S,
                           what="the cut-off member back in its group with partitions")
        finally:
            await other.close()
            await cut.close()
            await cut_engine.dispose()
            await producer.stop()


async def _now(*values: set[int]) -> tuple[set[int], ...]:
    return values
