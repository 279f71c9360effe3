"""The outbox relay against real PostgreSQL and Kafka, outside any service.

A scratch schema with its own outbox and a scratch topic: two relay instances publish the rows
of many sagas written by concurrent transactions, one of which commits late; then the active
relay dies and the standby takes over. Nothing is lost and each saga's events stay in order.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from aiokafka.errors import UnknownTopicOrPartitionError
from prometheus_client import REGISTRY
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from saga_harness import config
from saga_harness.kafka import TopicReader
from saga_harness.scratch import scratch_outbox
from saga_harness.waiting import current, wait_for
from sagakit.outbox.housekeeping import cleanup_published
from sagakit.outbox.relay import OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.store.outbox_signal import OutboxSignal
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "relaytest"
TOPIC = "relay-test-events"


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with scratch_outbox(SCHEMA, TOPIC, 6) as made:
        yield made


def _settings() -> MessagingSettings:
    return MessagingSettings(**config.kafka_fields(), relay_poll_interval_s=0.1,
                             relay_batch_size=50)


async def _write(engine: AsyncEngine, tables: object, saga_id: str, seq: int,
                 hold: asyncio.Event | None = None,
                 signal: OutboxSignal | None = None) -> None:
    """One transaction adds the saga's next event; ``hold`` keeps it open (a slow commit).
    Without ``signal`` it notifies, as a process whose relay does not lead."""
    uow = UnitOfWork(engine, tables, "relaytest", signal=signal)  # type: ignore[arg-type]
    async with uow:
        uow.emit_raw(topic=TOPIC, key=saga_id, event_type="Step",
                     value={"saga_id": saga_id, "seq": seq},
                     headers={"X-Saga-ID": saga_id, "X-Seq": str(seq)})
        if hold is not None:
            await uow.connection.execute(text("SELECT 1"))
            await hold.wait()
        await uow.commit()


async def test_two_relays_lose_nothing_and_keep_each_sagas_order(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    relays = [OutboxRelay(engine, tables, "relaytest", _settings()) for _ in range(2)]
    stops = [asyncio.Event() for _ in relays]
    sagas = [str(uuid.uuid4()) for _ in range(20)]
    per_saga = 15
    async with TopicReader(TOPIC) as topic:
        tasks = [asyncio.create_task(r.run(s)) for r, s in zip(relays, stops, strict=True)]
        # A slow transaction opens first and commits after later ones: its row has a lower id
        # than rows already published, and must not be skipped.
        slow_saga = str(uuid.uuid4())
        release = asyncio.Event()
        slow = asyncio.create_task(_write(engine, tables, slow_saga, 0, hold=release))
        for seq in range(per_saga):
            await asyncio.gather(*(_write(engine, tables, s, seq) for s in sagas))
            if seq == 5:
                leader = next(i for i, r in enumerate(relays) if r.is_leader)
                stops[leader].set()  # the active relay goes away; the standby takes over
                await tasks[leader]
                await relays[leader].close()
        release.set()
        await slow
        expected = len(sagas) * per_saga + 1

        await topic.wait_until(
            lambda records: len({(r.key, json.loads(r.value)["seq"]) for r in records})
            >= expected,
            timeout=30)
        for s in stops:
            s.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    seen: dict[str, list[int]] = defaultdict(list)
    for record in topic.records:
        body = json.loads(record.value)
        seen[body["saga_id"]].append(body["seq"])
    assert all(r.published_total > 0 for r in relays), "the standby published after takeover"
    assert seen[slow_saga] == [0], "the late commit was published"
    for saga_id in sagas:
        seqs = seen[saga_id]
        # Redelivery after a takeover may repeat a row; order must hold and nothing is missing.
        assert sorted(set(seqs)) == list(range(per_saga)), saga_id
        firsts = [s for i, s in enumerate(seqs) if s not in seqs[:i]]
        assert firsts == list(range(per_saga)), f"out of order for {saga_id}: {seqs}"
    async with engine.connect() as conn:
        pending = (await conn.execute(text(
            f"SELECT count(*) FROM {SCHEMA}.outbox WHERE status <> 'published'"))).scalar()
    assert pending == 0


async def test_rows_committed_while_a_batch_is_published_are_woken_for_not_polled(scratch) -> None:  # type: ignore[no-untyped-def]
    """After a batch smaller than its limit the relay waits for the next commit instead of
    selecting again at once. With the fallback poll out of reach (an hour), every row written
    by concurrent transactions while batches are in flight, a late commit among them, must
    still be published: woken by its NOTIFY (written as by another process)."""
    engine, tables = scratch
    settings = _settings()
    settings.relay_poll_interval_s = 3600
    relay = OutboxRelay(engine, tables, "relaytest", settings)
    stop = asyncio.Event()
    sagas = [str(uuid.uuid4()) for _ in range(10)]
    per_saga = 10
    async with TopicReader(TOPIC) as topic:
        task = asyncio.create_task(relay.run(stop))
        slow_saga = str(uuid.uuid4())
        release = asyncio.Event()
        slow = asyncio.create_task(_write(engine, tables, slow_saga, 0, hold=release))
        for seq in range(per_saga):
            await asyncio.gather(*(_write(engine, tables, s, seq) for s in sagas))
        release.set()
        await slow
        expected = {(s, q) for s in sagas for q in range(per_saga)} | {(slow_saga, 0)}
        await topic.wait_until(
            lambda records: {(json.loads(r.value)["saga_id"], json.loads(r.value)["seq"])
                             for r in records} >= expected,
            timeout=30)
        stop.set()
        relay._on_notify()
        await task
    assert relay.published_total == len(expected)


async def test_a_commit_in_the_leading_relays_process_wakes_it_without_a_notify(scratch) -> None:  # type: ignore[no-untyped-def]
    """Units of work that share the leading relay's signal commit without a NOTIFY (a listener
    on the relay's channel hears nothing: no commit took PostgreSQL's notification lock), and
    each row still reaches Kafka at once, in order, the poll an hour away. Once the relay has
    stood down, the same units of work notify again: the leader is then elsewhere."""
    engine, tables = scratch
    settings = _settings()
    settings.relay_poll_interval_s = 3600
    relay = OutboxRelay(engine, tables, "relaytest", settings)
    heard: list[str] = []
    listener = await asyncpg.connect(config.admin_dsn())
    await listener.add_listener(tables.notify_channel, lambda *args: heard.append(args[3]))
    stop = asyncio.Event()
    saga = str(uuid.uuid4())
    try:
        async with TopicReader(TOPIC) as topic:
            task = asyncio.create_task(relay.run(stop))
            await wait_for(lambda: current(relay.is_leader), bool, timeout=10,
                           what="the relay's lead")
            for seq in range(20):
                await _write(engine, tables, saga, seq, signal=relay.signal)
            await topic.wait_until(lambda records: len(_seqs(records, saga)) >= 20, timeout=30)
            seqs = _seqs(topic.records, saga)
            assert [s for i, s in enumerate(seqs) if s not in seqs[:i]] == list(range(20)), seqs
            # A NOTIFY sent after the last commit is delivered after every earlier one.
            await listener.execute(f"NOTIFY {tables.notify_channel}, 'probe'")
            await wait_for(lambda: current(list(heard)), lambda h: "probe" in h, timeout=10,
                           what="the probe notification")
            assert heard == ["probe"], "a commit in the leader's process notified"

            stop.set()
            await task
            await relay.close()
            await _write(engine, tables, saga, 20, signal=relay.signal)
            await wait_for(lambda: current(list(heard)), lambda h: len(h) == 2, timeout=10,
                           what="the notification of a commit with no relay leading here")
    finally:
        stop.set()
        await listener.close()
        await relay.close()


async def test_commits_in_a_standbys_process_reach_the_leader_without_a_notify_of_their_own(
        scratch) -> None:  # type: ignore[no-untyped-def]
    """Two replicas: units of work that share the standby relay's signal commit without a
    NOTIFY (every notification heard comes from the standby relay's own connection, none from
    a business transaction), and the leader, its poll an hour away, still publishes each row
    at once, in order (ADR 0010)."""
    engine, tables = scratch
    settings = _settings()
    settings.relay_poll_interval_s = 3600
    leader, standby = (OutboxRelay(engine, tables, "relaytest", settings, instance=str(k))
                       for k in (1, 2))
    senders: list[int] = []
    listener = await asyncpg.connect(config.admin_dsn())
    await listener.add_listener(tables.notify_channel, lambda conn, pid, *_: senders.append(pid))
    stops = [asyncio.Event(), asyncio.Event()]
    saga = str(uuid.uuid4())
    try:
        async with TopicReader(TOPIC) as topic:
            first = asyncio.create_task(leader.run(stops[0]))
            await wait_for(lambda: current(leader.is_leader), bool, timeout=10,
                           what="the first relay's lead")
            second = asyncio.create_task(standby.run(stops[1]))
            await wait_for(lambda: current(standby._listen_conn is not None
                                           and not standby.signal.notify_needed), bool,
                           timeout=10, what="the standby connected")
            assert not standby.is_leader
            for seq in range(20):
                await _write(engine, tables, saga, seq, signal=standby.signal)
            await topic.wait_until(lambda records: len(_seqs(records, saga)) >= 20, timeout=30)
            seqs = _seqs(topic.records, saga)
            assert [s for i, s in enumerate(seqs) if s not in seqs[:i]] == list(range(20)), seqs
            assert standby._listen_conn is not None
            assert senders and set(senders) == {standby._listen_conn.get_server_pid()}, \
                "a business transaction notified"
            assert len(senders) <= 20
            for stop in stops:
                stop.set()
            await asyncio.gather(first, second)
    finally:
        for stop in stops:
            stop.set()
        await listener.close()
        await leader.close()
        await standby.close()


async def test_dead_lettered_inbox_rows_are_purged_after_their_own_retention(scratch) -> None:  # type: ignore[no-untyped-def]
    """Dead-lettered inbox rows were kept for ever: the table and dlq_messages_total only ever
    grew. They now go after SAGA_INBOX_DEAD_LETTER_RETENTION_DAYS, longer than the processed
    rows' retention."""
    engine, tables = scratch
    async with engine.begin() as conn:
        await conn.execute(text(
            f"INSERT INTO {SCHEMA}.processed_messages (message_id, event_type, status, "
            "processed_at) VALUES ('dead-40d', 'E', 'dead_lettered', now() - interval '40 days'), "
            "('dead-20d', 'E', 'dead_lettered', now() - interval '20 days'), "
            "('done-8d', 'E', 'processed', now() - interval '8 days'), "
            "('done-1d', 'E', 'processed', now() - interval '1 day')"))
    from sagakit.store.inbox import cleanup_processed

    assert await cleanup_processed(engine, tables, 7, batch_size=1,  # type: ignore[arg-type]
                                   dead_letter_retention_days=30) == 2
    async with engine.connect() as conn:
        inbox = (await conn.execute(text(
            f"SELECT array_agg(message_id ORDER BY 1) FROM {SCHEMA}.processed_messages"))
        ).scalar()
    assert sorted(inbox) == ["dead-20d", "done-1d"]
    job = MessagingSettings()
    assert job.inbox_retention_days < job.inbox_dead_letter_retention_days


def _seqs(records: Any, saga_id: str) -> list[int]:
    return [json.loads(r.value)["seq"] for r in records
            if json.loads(r.value)["saga_id"] == saga_id]


async def test_cleanup_removes_only_rows_past_their_age(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    for seq in range(10):
        await _write(engine, tables, "saga-clean", seq)
    async with engine.begin() as conn:
        await conn.execute(text(
            f"UPDATE {SCHEMA}.outbox SET status = 'published', published_at = now() - "
            "CASE WHEN (payload->>'seq')::int < 7 THEN interval '8 days' "
            "ELSE interval '6 days' END"))
        await conn.execute(text(
            f"INSERT INTO {SCHEMA}.processed_messages (message_id, event_type, status, "
            "processed_at) VALUES ('old', 'E', 'processed', now() - interval '8 days'), "
            "('new', 'E', 'processed', now() - interval '6 days'), "
            "('old-dead', 'E', 'dead_lettered', now() - interval '30 days')"))
        # A dead letter published long ago: kept until an operator archives it.
        await conn.execute(text(
            f"INSERT INTO {SCHEMA}.outbox (message_id, saga_id, topic, event_type, "
            "schema_version, payload, headers, status, published_at) VALUES "
            f"(gen_random_uuid(), 'saga-clean', '{SCHEMA}-dlq', 'E', '1.0.0', "
            "'{\"seq\": 100}', '{}', 'published', now() - interval '30 days')"))
    assert await cleanup_published(engine, tables, 7, batch_size=3) == 7
    from sagakit.store.inbox import cleanup_processed

    assert await cleanup_processed(engine, tables, 7) == 1  # type: ignore[arg-type]
    async with engine.connect() as conn:
        left = (await conn.execute(text(
            f"SELECT array_agg((payload->>'seq')::int ORDER BY 1) FROM {SCHEMA}.outbox"))).scalar()
        inbox = (await conn.execute(text(
            f"SELECT array_agg(message_id ORDER BY 1) FROM {SCHEMA}.processed_messages"))
        ).scalar()
    assert sorted(left) == [7, 8, 9, 100]
    assert sorted(inbox) == ["new", "old-dead"], "dead letters are kept for the operators"


async def test_the_batch_statement_is_planned_once_and_reads_the_pending_rows_by_index(scratch) -> None:  # type: ignore[no-untyped-def]
    """The relay's mark-and-select runs for every batch: planning it each time cost PostgreSQL
    more than running it. Its connection keeps one generic plan, and
    that plan must still find the pending rows through their partial index, not by walking an
    outbox full of published ones (which a plan with the status bound as a parameter does)."""
    engine, tables = scratch
    async with engine.begin() as conn:
        # An outbox as it looks after a day of traffic: published rows everywhere.
        await conn.execute(text(
            f"INSERT INTO {SCHEMA}.outbox (message_id, saga_id, topic, event_type, "
            "schema_version, payload, headers, status, published_at) "
            "SELECT gen_random_uuid(), 'old-' || g, 'old', 'Old', '1', '{}', '{}', "
            "'published', now() FROM generate_series(1, 50000) AS g"))
    async with engine.connect() as conn:
        await conn.execute(text(f"ANALYZE {SCHEMA}.outbox"))
    relay = OutboxRelay(engine, tables, "relaytest", _settings())
    saga = str(uuid.uuid4())
    batches = 8
    try:
        assert await relay.lead()
        async with TopicReader(TOPIC) as topic:
            for seq in range(batches):
                await _write(engine, tables, saga, seq)
                assert await relay.publish_batch() == 1
            await topic.wait_until(
                lambda records: {json.loads(r.value)["seq"] for r in records
                                 if json.loads(r.value)["saga_id"] == saga}
                >= set(range(batches)), timeout=30)
        conn = relay._listen_conn
        assert conn is not None
        [statement] = await conn.fetch(
            "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE '%WITH marked AS%' "
            "AND statement NOT LIKE '%pg_prepared_statements%'")
        assert statement["custom_plans"] == 0, statement
        assert statement["generic_plans"] == batches, statement
        plan = "\n".join(r[0] for r in await conn.fetch(
            f"EXPLAIN EXECUTE {statement['name']}('{{}}', '{{}}', 50, {relay.lease.epoch})"))
        assert "ix_outbox_pending" in plan, plan
    finally:
        await relay.close()


async def _write_row(engine: AsyncEngine, tables: MessagingTables, saga_id: str, seq: int, *,
                     topic: str = TOPIC, pad: int = 0) -> None:
    async with UnitOfWork(engine, tables, "relaytest") as uow:
        uow.emit_raw(topic=topic, key=saga_id, event_type="Step",
                     value={"saga_id": saga_id, "seq": seq, "pad": "x" * pad},
                     headers={"X-Saga-ID": saga_id})
        await uow.commit()


async def _row(engine: AsyncEngine, saga_id: str, seq: int) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(text(
            f"SELECT status, attempts, last_error FROM {SCHEMA}.outbox "
            "WHERE saga_id = :s AND (payload->>'seq')::int = :q"), {"s": saga_id, "q": seq})
        ).first()


def _publish_errors(error_type: str) -> float:
    return REGISTRY.get_sample_value("outbox_publish_errors_total",
                                     {"service": "relaytest", "error_type": error_type}) or 0.0


async def test_a_row_too_large_for_kafka_is_failed_and_every_other_saga_flows(scratch) -> None:  # type: ignore[no-untyped-def]
    """Regression: aiokafka's send() refuses a record larger than the producer's request limit
    at once (MessageSizeTooLargeError), before any acknowledgement. The relay took that for the
    broker being away: the row was never counted nor given up on, and every later row, of
    every saga, waited behind it for ever. It can never be published: it is marked failed at
    once, counted in the metrics; its saga's later row waits behind it; the others flow."""
    engine, tables = scratch
    settings = _settings()
    settings.relay_max_attempts = 5
    relay = OutboxRelay(engine, tables, "relaytest", settings)
    big, others = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in range(3)]
    # First in id order: every other row is selected behind it.
    await _write_row(engine, tables, big, 0, pad=2 * 1024 * 1024)
    await _write_row(engine, tables, big, 1)
    for saga_id in others:
        await _write_row(engine, tables, saga_id, 0)
    errors_before = _publish_errors("MessageSizeTooLargeError")
    stop = asyncio.Event()
    async with TopicReader(TOPIC) as topic:
        task = asyncio.create_task(relay.run(stop))
        try:
            await topic.wait_until(
                lambda records: set(others) <= {json.loads(r.value)["saga_id"] for r in records},
                timeout=30)
            refused = await wait_for(lambda: _row(engine, big, 0),
                                     lambda r: r.status == "failed", timeout=10,
                                     what="the row too large marked failed")
        finally:
            stop.set()
            await task
    assert refused.attempts == 1, "never publishable: given up on at its first refusal"
    assert "MessageSizeTooLargeError" in refused.last_error
    assert (await _row(engine, big, 1)).status == "pending", "its saga's next row waits"
    assert not [r for r in topic.records if json.loads(r.value)["saga_id"] == big]
    assert _publish_errors("MessageSizeTooLargeError") == errors_before + 1


class _Producer:
    """Kafka for the relay, but a topic that does not exist; ``answers``: whether the cluster
    answers a metadata request (aiokafka names the topic unknown when it could not ask)."""

    def __init__(self, answers: bool) -> None:
        self.sent: list[tuple[str, int]] = []
        self.client = self
        self.answers = answers

    async def force_metadata_update(self) -> bool:
        return self.answers

    async def send(self, topic: str, value: bytes, **_: Any) -> asyncio.Future[None]:
        if topic == "no-such-topic":
            raise UnknownTopicOrPartitionError()
        body = json.loads(value)
        self.sent.append((body["saga_id"], body["seq"]))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def stop(self) -> None:
        return None


async def test_a_row_for_a_topic_that_does_not_exist_is_counted_and_failed_after_its_attempts(
        scratch) -> None:  # type: ignore[no-untyped-def]
    """An unknown topic might yet be created: the row is counted on each refusal and failed
    after ``relay_max_attempts``; the rows of other sagas are published meanwhile and its own
    saga's next row never is."""
    engine, tables = scratch
    settings = _settings()
    settings.relay_max_attempts = 2
    relay = OutboxRelay(engine, tables, "relaytest", settings)
    lost, other = str(uuid.uuid4()), str(uuid.uuid4())
    await _write_row(engine, tables, lost, 0, topic="no-such-topic")
    await _write_row(engine, tables, lost, 1)
    await _write_row(engine, tables, other, 0)
    producer = relay.publisher.producer = _Producer(answers=True)
    try:
        assert await relay.lead()
        assert await relay.publish_batch() == 1
        counted = await _row(engine, lost, 0)
        assert (counted.status, counted.attempts) == ("pending", 1)
        assert "UnknownTopicOrPartitionError" in counted.last_error
        await _write_row(engine, tables, other, 1)
        assert await relay.publish_batch() == 1
        assert (await _row(engine, lost, 0)).status == "failed"
        assert await relay.publish_batch() == 0, "its saga's next row waits behind it"
    finally:
        await relay.close()
    assert producer.sent == [(other, 0), (other, 1)]
    assert (await _row(engine, lost, 1)).status == "pending"


async def test_an_unknown_topic_while_the_cluster_does_not_answer_is_the_broker_away(
        scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    relay = OutboxRelay(engine, tables, "relaytest", _settings())
    saga_id = str(uuid.uuid4())
    await _write_row(engine, tables, saga_id, 0, topic="no-such-topic")
    relay.publisher.producer = _Producer(answers=False)
    try:
        assert await relay.lead()
        with pytest.raises(UnknownTopicOrPartitionError):
            await relay.publish_batch()
    finally:
        await relay.close()
    row = await _row(engine, saga_id, 0)
    assert (row.status, row.attempts) == ("pending", 0), "not the row's fault: not counted"
