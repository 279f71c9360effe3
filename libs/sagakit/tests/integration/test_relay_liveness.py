"""A relay leader that hangs, is cut off from PostgreSQL, or is cut off from Kafka loses the lead
within its bound, another instance publishes, and what the former leader does when it wakes is
harmless (ADR 0012).

Two relay processes (``saga_harness.relay_process``) publish one scratch outbox, each reaching
PostgreSQL through a route of its own of the TCP proxy (``tools/netproxy``, run here); the first
to lead also reaches Kafka through one. Each test lets it lead and publish, then: blackholes its
PostgreSQL route (bytes held both ways, the connections left open, as in a partition), stops it
with SIGSTOP and later resumes it, or blackholes its Kafka route. A last one runs two relays in
this process and freezes the leader's loop between its select and its sends. Each measures the
time from the fault to the moment rows written after it are on the topic, published by the
standby, and checks every saga's events on the topic: all there, in order, and (where the
former leader had nothing in flight) each once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from netproxy.layout import kafka_listener_port, route_port
from netproxy.proxy import ProxySet
from saga_harness import config, db
from saga_harness.kafka import TopicReader
from saga_harness.ports import free_port
from saga_harness.relay_process import RelayProcess
from saga_harness.scratch import scratch_outbox
from saga_harness.waiting import current, wait_for
from sagakit.outbox.relay import OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "relaylive"
TOPIC = "relay-liveness-events"
SAGAS = 6

# The bounds with the default settings (docs/operations.md#relay-leadership; the relay's unit
# tests hold the defaults to these numbers). A leader that hangs or loses PostgreSQL renews
# nothing: its lease (relay_lease_s) runs out, and a standby takes it at its next try (every
# relay_poll_interval_s). One cut off from Kafka finishes no round: at the first renewal after
# relay_stall_s (renewals come every quarter of the lease) it gives the lead up, and a standby
# takes it at its next try.
LEASE_S = 5.0
POLL_S = 0.5
STALL_S = 6.0
HUNG_OR_PARTITIONED_BOUND_S = LEASE_S + POLL_S
CUT_OFF_FROM_KAFKA_BOUND_S = STALL_S + LEASE_S / 4 + POLL_S
# What the measurement adds to the relay's own bound: the standby's first batch (its producer
# starts), this test reading the topic (a fetch every 200 ms at most), processes sharing cores.
SLACK_S = 2.0


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with scratch_outbox(SCHEMA, TOPIC, 6) as made:
        yield made


@dataclass
class Pair:
    first: RelayProcess
    """The instance that leads first."""
    second: RelayProcess
    proxies: ProxySet


async def _connected(instance: str) -> bool:
    return bool(await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
        f"{SCHEMA}-relay@{instance}"))


@contextlib.asynccontextmanager
async def _relays(logs: Path, *, first_kafka_proxied: bool = False) -> AsyncIterator[Pair]:
    """The first relay leads; the second is connected and stands by."""
    pg = {name: free_port() for name in ("first", "second")}
    routes = {f"{name}-postgres": (port, "127.0.0.1", config.PG_PORT)
              for name, port in pg.items()}
    first_kafka = config.KAFKA
    if first_kafka_proxied:
        # Kafka advertises this listener at the proxy's port: every connection the first
        # relay's producer opens after bootstrap goes through the proxy too.
        routes["first-kafka"] = (route_port("pedidos", "kafka"), "127.0.0.1",
                                 kafka_listener_port("pedidos"))
        first_kafka = f"127.0.0.1:{route_port('pedidos', 'kafka')}"
    async with ProxySet(routes) as proxies:
        first = RelayProcess(SCHEMA, "first", config.admin_url_through(pg["first"]), first_kafka,
                             logs / "first.log")
        second = RelayProcess(SCHEMA, "second", config.admin_url_through(pg["second"]), config.KAFKA,
                              logs / "second.log")
        try:
            await first.start()
            await first.wait(lambda r: r.leads, timeout=30, what="leads")
            await second.start()
            await wait_for(lambda: _connected("second"), bool, timeout=30,
                           what="the second relay connected")
            yield Pair(first, second, proxies)
        finally:
            proxies.clear()
            await second.stop()
            await first.stop()
            print(f"relay logs in {logs}")


async def _write(engine: AsyncEngine, tables: MessagingTables, sagas: list[str], seq: int
                 ) -> None:
    """The next event of every saga, each in a transaction of its own (which notifies, as in
    a process whose relay does not lead)."""
    for saga_id in sagas:
        async with UnitOfWork(engine, tables, SCHEMA) as uow:
            uow.emit_raw(topic=TOPIC, key=saga_id, event_type="Step",
                         value={"saga_id": saga_id, "seq": seq},
                         headers={"X-Saga-ID": saga_id})
            await uow.commit()


def _seen(records: list[Any], sagas: list[str]) -> list[tuple[str, int]]:
    bodies = [json.loads(r.value) for r in records]
    return [(b["saga_id"], b["seq"]) for b in bodies if b["saga_id"] in sagas]


async def _published(topic: TopicReader, sagas: list[str], seq: int, timeout: float) -> float:
    """Waits until event ``seq`` of every saga is on the topic; returns when (monotonic)."""
    wanted = {(s, seq) for s in sagas}
    await topic.wait_until(lambda records: wanted <= set(_seen(records, sagas)),
                           timeout=timeout)
    return time.monotonic()


async def _next(engine: AsyncEngine, tables: MessagingTables, topic: TopicReader,
                sagas: list[str], seq: int, timeout: float = 15) -> float:
    """Writes event ``seq`` of every saga and waits until it is on the topic; returns when."""
    await _write(engine, tables, sagas, seq)
    return await _published(topic, sagas, seq, timeout=timeout)


async def _settled(engine: AsyncEngine, tables: MessagingTables, topic: TopicReader,
                   sagas: list[str], seq: int) -> None:
    """``_next``, and every row marked published after it."""
    await _next(engine, tables, topic, sagas, seq)
    await _all_marked(engine)


async def _all_marked(engine: AsyncEngine) -> None:
    """Every row marked published: nothing the leader acknowledged is left for the next."""
    async def unmarked() -> int:
        async with engine.connect() as conn:
            return int((await conn.execute(text(
                f"SELECT count(*) FROM {SCHEMA}.outbox WHERE status <> 'published'"))).scalar_one())
    await wait_for(unmarked, lambda n: n == 0, timeout=10, what="every row marked published")


def _check_order(records: list[Any], sagas: list[str], last_seq: int, *, once: bool) -> None:
    """Every saga's events 0..``last_seq`` reached the topic in order (their first copies);
    with ``once``, none twice."""
    seen = _seen(records, sagas)
    for saga_id in sagas:
        seqs = [q for s, q in seen if s == saga_id]
        firsts = [q for i, q in enumerate(seqs) if q not in seqs[:i]]
        assert firsts == list(range(last_seq + 1)), f"saga {saga_id}: {seqs}"
    if once:
        twice = {k: n for k, n in Counter(seen).items() if n > 1}
        assert not twice, f"published twice: {twice}"


async def _holder() -> str | None:
    return await db.fetchval(f"SELECT holder FROM {SCHEMA}.outbox_relay_lease")


async def test_a_leader_cut_off_from_postgres_is_replaced_within_its_lease(
        scratch: tuple[AsyncEngine, MessagingTables], tmp_path: Path) -> None:
    engine, tables = scratch
    sagas = [str(uuid.uuid4()) for _ in range(SAGAS)]
    async with TopicReader(TOPIC) as topic, _relays(tmp_path) as pair:
        await _settled(engine, tables, topic, sagas, 0)
        published_by_first = pair.first.published
        assert published_by_first >= SAGAS and pair.second.published == 0

        pair.proxies["first-postgres"].set(blackhole=True)
        cut_at = time.monotonic()
        await _write(engine, tables, sagas, 1)
        seen_at = await _published(topic, sagas, 1,
                                   timeout=HUNG_OR_PARTITIONED_BOUND_S + SLACK_S)
        print(f"cut off from PostgreSQL: the standby published {seen_at - cut_at:.2f}s after "
              f"the cut (bound {HUNG_OR_PARTITIONED_BOUND_S}s + {SLACK_S}s)")
        await pair.second.wait(lambda r: r.published >= SAGAS, timeout=5,
                               what="says it published them")
        # The cut-off leader knows it no longer leads once its lease has run out by its own
        # clock, whether or not its statements have timed out yet.
        gave_up = await pair.first.wait(lambda r: not r.leads, timeout=LEASE_S + SLACK_S,
                                        what="gives the lead up")
        print(f"the cut-off leader stopped leading {gave_up.at - cut_at:.2f}s after the cut")
        assert gave_up.at - cut_at <= LEASE_S + SLACK_S

        await _next(engine, tables, topic, sagas, 2)
        pair.proxies.clear()
        await wait_for(lambda: _connected("first"), bool, timeout=30,
                       what="the first relay connected again")
        await _settled(engine, tables, topic, sagas, 3)
        assert pair.first.published == published_by_first, \
            "the former leader published after the cut"
        assert not pair.first.leads and await _holder() == f"{SCHEMA}-relay@second"
    _check_order(topic.records, sagas, 3, once=True)


async def test_a_hung_leader_is_replaced_and_publishes_nothing_when_it_wakes(
        scratch: tuple[AsyncEngine, MessagingTables], tmp_path: Path) -> None:
    engine, tables = scratch
    sagas = [str(uuid.uuid4()) for _ in range(SAGAS)]
    async with TopicReader(TOPIC) as topic, _relays(tmp_path) as pair:
        await _settled(engine, tables, topic, sagas, 0)

        pair.first.pause()
        hung_at = time.monotonic()
        await _write(engine, tables, sagas, 1)
        seen_at = await _published(topic, sagas, 1,
                                   timeout=HUNG_OR_PARTITIONED_BOUND_S + SLACK_S)
        print(f"hung (SIGSTOP): the standby published {seen_at - hung_at:.2f}s after the hang "
              f"(bound {HUNG_OR_PARTITIONED_BOUND_S}s + {SLACK_S}s)")
        await _settled(engine, tables, topic, sagas, 2)
        published_by_first = pair.first.published

        # It wakes with its loop where it stopped, its lease long gone: it knows it does not
        # lead before it does anything, and the rows written from now on are the standby's.
        pair.first.resume()
        resumed_at = time.monotonic()
        woke = await pair.first.wait(lambda r: r.last is not None and r.last.at > hung_at
                                     and not r.leads, timeout=10, what="wakes as a standby")
        print(f"the woken leader said it does not lead {woke.at - resumed_at:.3f}s after "
              "it was resumed")
        for seq in (3, 4):
            await _next(engine, tables, topic, sagas, seq)
        await _all_marked(engine)
        assert pair.first.published == published_by_first, "the woken leader published"
        assert not pair.first.leads and await _holder() == f"{SCHEMA}-relay@second"
    _check_order(topic.records, sagas, 4, once=True)


async def test_a_leader_cut_off_from_kafka_gives_the_lead_up(
        scratch: tuple[AsyncEngine, MessagingTables], tmp_path: Path) -> None:
    engine, tables = scratch
    sagas = [str(uuid.uuid4()) for _ in range(SAGAS)]
    async with TopicReader(TOPIC) as topic, _relays(tmp_path, first_kafka_proxied=True) as pair:
        await _settled(engine, tables, topic, sagas, 0)

        pair.proxies["first-kafka"].set(blackhole=True)
        cut_at = time.monotonic()
        await _write(engine, tables, sagas, 1)
        seen_at = await _published(topic, sagas, 1,
                                   timeout=CUT_OFF_FROM_KAFKA_BOUND_S + SLACK_S)
        print(f"cut off from Kafka: the standby published {seen_at - cut_at:.2f}s after the "
              f"cut (bound {CUT_OFF_FROM_KAFKA_BOUND_S}s + {SLACK_S}s)")
        assert not pair.first.leads

        # Still cut off, it does not take the lead back: the standby publishes what follows.
        for seq in (2, 3):
            await _next(engine, tables, topic, sagas, seq)
        assert await _holder() == f"{SCHEMA}-relay@second"
        gave_up = next(r for r in pair.first.reports if r.at > cut_at and not r.leader)
        assert not [r for r in pair.first.reports if r.at > gave_up.at and r.leader], \
            "the cut-off relay led again"

        pair.proxies.clear()
        await _next(engine, tables, topic, sagas, 4)
    # What the cut-off leader had handed its producer may reach the topic when its route heals:
    # copies, behind the first ones.
    _check_order(topic.records, sagas, 4, once=False)


async def test_a_leader_whose_loop_froze_mid_batch_gives_the_lead_up_and_sends_none_of_it(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch) -> None:
    """The worst moment for a leader's loop to stop (a call that never returns, a process
    paused while its lease keeper is not): rows selected, none sent. The lease keeper sees no
    round finished for ``relay_stall_s`` and gives the lead up; the standby publishes those
    rows and the next. When the loop goes on, it sends none of its batch: the rows of it the
    standby already published would otherwise reach the topic again after later ones."""
    engine, tables = scratch
    sagas = [str(uuid.uuid4()) for _ in range(SAGAS)]
    settings = MessagingSettings(**config.kafka_fields())
    first, second = (OutboxRelay(engine, tables, SCHEMA, settings, instance=name)
                     for name in ("first", "second"))
    frozen, thaw = asyncio.Event(), asyncio.Event()
    publish = first.publisher.publish

    async def publish_after_thaw(rows: list[Any]) -> int:
        if rows and not frozen.is_set():
            frozen.set()
            await thaw.wait()
        return await publish(rows)

    monkeypatch.setattr(first.publisher, "publish", publish_after_thaw)
    stops = [asyncio.Event(), asyncio.Event()]
    tasks: list[asyncio.Task[None]] = []
    try:
        async with TopicReader(TOPIC) as topic:
            tasks.append(asyncio.create_task(first.run(stops[0])))
            await wait_for(lambda: current(first.is_leader), bool, timeout=10,
                           what="the first relay leads")
            tasks.append(asyncio.create_task(second.run(stops[1])))
            await wait_for(lambda: _connected("second"), bool, timeout=10,
                           what="the second relay connected")
            await _write(engine, tables, sagas, 0)
            await asyncio.wait_for(frozen.wait(), 10)
            frozen_at = time.monotonic()
            seen_at = await _published(topic, sagas, 0,
                                       timeout=CUT_OFF_FROM_KAFKA_BOUND_S + SLACK_S)
            print(f"loop frozen mid-batch: the standby published {seen_at - frozen_at:.2f}s "
                  f"after (bound {CUT_OFF_FROM_KAFKA_BOUND_S}s + {SLACK_S}s)")
            await _next(engine, tables, topic, sagas, 1)

            thaw.set()
            for seq in (2, 3):
                await _next(engine, tables, topic, sagas, seq)
            await _all_marked(engine)
            assert first.published_total == 0, "the thawed relay sent its batch"
            assert not first.is_leader and second.is_leader
    finally:
        for stop in stops:
            stop.set()
        thaw.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await first.close()
        await second.close()
    _check_order(topic.records, sagas, 3, once=True)
