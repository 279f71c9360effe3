"""The consumer loop against real Kafka and PostgreSQL, outside any service: a record waiting
for its retry does not hold up other partitions, and exhausted retries are dead-lettered with
their history."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime

import pytest
from aiokafka import AIOKafkaProducer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from saga_contracts.events.orders import OrdenCompletada
from saga_harness import config
from saga_harness.kafka import envelope
from saga_harness.scratch import scratch_outbox
from saga_harness.waiting import wait_for
from sagakit.consumer import EventConsumer, Handler, Origin, RawRecord, Subscription
from sagakit.errors import PermanentError, TransientError
from sagakit.message import Message
from sagakit.settings import MessagingSettings
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SERVICE = "consumertest"
TOPIC = "consumer-test-events"


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with scratch_outbox(SERVICE, TOPIC, 3, fresh_topic=True) as made:
        yield made


@contextlib.asynccontextmanager
async def _consuming(scratch: tuple[AsyncEngine, MessagingTables], handler: Handler[OrdenCompletada],
                     settings: MessagingSettings, started: list[EventConsumer] | None = None
                     ) -> AsyncIterator[Callable[[str, int], Awaitable[None]]]:
    """Runs an EventConsumer on the scratch topic (appended to ``started``); yields
    ``send(saga_id, partition)``."""
    engine, tables = scratch
    consumer = EventConsumer(service=SERVICE, topics=[TOPIC],
                             subscriptions=[Subscription(OrdenCompletada, handler)],
                             uow_factory=lambda **kw: UnitOfWork(engine, tables, SERVICE, **kw),
                             settings=settings,
                             origins={"OrdenCompletada": Origin(TOPIC, "pedidos")})
    if started is not None:
        started.append(consumer)
    stop = asyncio.Event()
    task = asyncio.create_task(consumer.run(stop))
    producer = AIOKafkaProducer(**config.kafka_client(), acks="all")
    await producer.start()

    async def send(saga_id: str, partition: int) -> None:
        # Keyed by the saga, as the relay keys it; the partition is the test's choice.
        await producer.send_and_wait(TOPIC, json.dumps(_event(saga_id)).encode(),
                                     key=saga_id.encode(), partition=partition)
    try:
        await consumer.assigned.wait()
        yield send
    finally:
        stop.set()
        await task
        await producer.stop()


def _event(saga_id: str) -> dict:
    return envelope("OrdenCompletada", {"order_id": str(uuid.uuid4()), "total_amount": "1.00",
                                        "currency": "USD"}, saga_id=saga_id, source="pedidos")


async def test_a_retrying_partition_does_not_hold_up_the_others(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, _ = scratch
    slow, fast, poison = (str(uuid.uuid4()) for _ in range(3))
    calls: dict[str, list[float]] = {slow: [], fast: [], poison: []}
    done: dict[str, float] = {}

    async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        calls[event.saga_id].append(time.monotonic())
        if event.saga_id == poison or (event.saga_id == slow and len(calls[slow]) < 3):
            raise TransientError("gateway busy")
        done[event.saga_id] = time.monotonic()
        await uow.commit()

    settings = MessagingSettings(**config.kafka_fields(),
                                 retry_initial_backoff_s=0.4, retry_max_attempts=5)
    async with _consuming(scratch, handler, settings) as send:
        started = time.monotonic()
        await send(slow, 0)
        await send(poison, 2)
        await send(fast, 1)

        async def finished() -> int:
            return len(done)
        await wait_for(finished, lambda n: n == 2, timeout=30, what="slow and fast handled")
        await wait_for(lambda: _dead_letters(engine), lambda rows: len(rows) == 1,
                       timeout=30, what="poison dead-lettered")

    assert done[fast] - started < 2.0, "the fast partition was not held up by the others"
    assert done[fast] < done[slow], "the retrying record finished later"
    assert len(calls[slow]) == 3 and calls[slow][1] - calls[slow][0] >= 0.4 * 0.8
    record = (await _dead_letters(engine))[0]
    assert record["reason"] == "retries_exhausted" and record["attempt_count"] == 5
    stamps = [datetime.fromisoformat(a["at"].replace("Z", "+00:00")) for a in record["attempts"]]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(stamps)]
    assert all(g >= 0.4 * 0.8 * 2 ** i for i, g in enumerate(gaps)), gaps
    assert all("gateway busy" in a["error"] for a in record["attempts"])


async def _dead_letters(engine: AsyncEngine) -> list[dict]:
    async with engine.connect() as conn:
        rows = (await conn.execute(text(
            f"SELECT payload FROM {SERVICE}.outbox WHERE topic = '{SERVICE}-dlq'"))).all()
    return [r.payload for r in rows]


async def test_a_handler_past_its_timeout_is_abandoned_retried_and_dead_lettered(scratch) -> None:  # type: ignore[no-untyped-def]
    """The third of docs/standard.md#failure-scenarios at the unit of the consumer: a transaction
    stuck on a slow database is given up at the handler timeout, rolled back, retried, then
    dead-lettered."""
    engine, _ = scratch
    stuck = str(uuid.uuid4())
    attempts: list[float] = []

    async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        attempts.append(time.monotonic())
        await uow.connection.execute(text(
            f"INSERT INTO {SERVICE}.processed_messages (message_id, event_type, saga_id, status) "
            "VALUES (:m, 'Effect', :s, 'processed')"), {"m": str(uuid.uuid4()), "s": event.saga_id})
        await uow.connection.execute(text("SELECT pg_sleep(5)"))  # a query that answers in seconds
        await uow.commit()

    settings = MessagingSettings(**config.kafka_fields(), handler_timeout_s=0.5,
                                 retry_initial_backoff_s=0.1, retry_max_attempts=3)
    async with _consuming(scratch, handler, settings) as send:
        await send(stuck, 0)
        await wait_for(lambda: _dead_letters(engine), lambda rows: len(rows) == 1,
                       timeout=30, what="the stuck event dead-lettered")

    record = (await _dead_letters(engine))[0]
    assert record["reason"] == "retries_exhausted" and record["attempt_count"] == 3
    assert all("ran past 0.5s" in a["error"] for a in record["attempts"]), record["attempts"]
    assert len(attempts) == 3
    async with engine.connect() as conn:
        # Every abandoned attempt was rolled back: no half-done effect survived.
        effects = (await conn.execute(text(
            f"SELECT count(*) FROM {SERVICE}.processed_messages WHERE event_type = 'Effect'"))).scalar()
        # And nothing is left holding a transaction open (the sleeping queries were cancelled or
        # their connections dropped), so no lock outlives the attempt.
        lingering = (await conn.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(5)' "
            "AND state <> 'idle' AND now() - query_start > interval '4 seconds'"))).scalar()
    assert effects == 0
    assert lingering == 0


async def test_a_slow_partition_does_not_hold_up_the_others(scratch) -> None:  # type: ignore[no-untyped-def]
    """Regression (chaos suite, slow database): records of one fetch used to be handled as one
    batch, so a partition busy for seconds (a query on a slow database, a dead letter being
    written) held back every other partition's next records."""
    slow, first, second = (str(uuid.uuid4()) for _ in range(3))
    done: dict[str, float] = {}
    release = asyncio.Event()

    async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        if event.saga_id == slow:
            await release.wait()  # busy until the other partition has moved on
        done[event.saga_id] = time.monotonic()
        await uow.commit()

    settings = MessagingSettings(**config.kafka_fields())
    async with _consuming(scratch, handler, settings) as send:
        try:
            await send(slow, 0)
            await send(first, 1)

            async def handled() -> set[str]:
                return set(done)
            await wait_for(handled, lambda d: first in d, timeout=15, what="partition 1 handled")
            # A later record on the free partition, fetched while partition 0 is still busy.
            await send(second, 1)
            await wait_for(handled, lambda d: second in d, timeout=15,
                           what="partition 1's next record handled while partition 0 is busy")
            assert slow not in done
            release.set()
            await wait_for(handled, lambda d: slow in d, timeout=15, what="partition 0 handled")
        finally:
            release.set()


async def test_a_busy_partition_stays_in_the_fetch(scratch) -> None:  # type: ignore[no-untyped-def]
    """Regression (found by the benchmark): a partition used to be paused while its records were
    handled, so the fetch sent meanwhile left it out and a record produced on it had to wait
    for that fetch to come back empty — up to the whole fetch wait — before it was even asked
    for. The fetch wait here is 4 s; the next record must not wait for it."""
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    done: dict[str, float] = {}
    first_started = asyncio.Event()
    release = asyncio.Event()

    async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        if event.saga_id == first:
            first_started.set()
            await release.wait()
        done[event.saga_id] = time.monotonic()
        await uow.commit()

    settings = MessagingSettings(**config.kafka_fields(),
                                 consumer_fetch_max_wait_ms=4000)
    async with _consuming(scratch, handler, settings) as send:
        try:
            await send(first, 0)
            await asyncio.wait_for(first_started.wait(), 15)
            await send(second, 0)  # same partition, while the first record is being handled
            release.set()

            async def handled() -> set[str]:
                return set(done)
            await wait_for(handled, lambda d: second in d, timeout=15, what="second handled")
            # Handled right behind the first: it was fetched while the first was still busy.
            # Left out of the fetch, it would come 3.5-4 s later (the rest of the fetch wait).
            assert done[second] - done[first] < 2.0, done[second] - done[first]
        finally:
            release.set()


async def test_a_consumer_whose_fetch_task_died_is_replaced(scratch) -> None:  # type: ignore[no-untyped-def]
    """Regression (make chaos): aiokafka's fetch task died on a connection reset (uvloop's
    RuntimeError, aio-libs/aiokafka#1038) and getmany() returned nothing from then on, without
    an error: every later saga timed out. Here the task is ended the way #983 describes (a
    cancellation it swallows). The fetch already in flight may still bring one record; the
    records after it need a consumer that fetches again."""
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    done: set[str] = set()

    async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        done.add(event.saga_id)
        await uow.commit()

    async def handled() -> set[str]:
        return set(done)

    started: list[EventConsumer] = []
    settings = MessagingSettings(**config.kafka_fields())
    async with _consuming(scratch, handler, settings, started) as send:
        kafka_consumer = started[0].kafka
        assert kafka_consumer is not None
        fetch_task = kafka_consumer._fetcher.error_future
        fetch_task.cancel()
        await asyncio.wait([fetch_task], timeout=5)
        assert fetch_task.done()
        for saga_id in (first, second):
            await send(saga_id, 0)
            await wait_for(handled, lambda d, s=saga_id: s in d, timeout=30,  # type: ignore[misc]
                           what="a record sent after the fetch task died")
        assert started[0].kafka is not kafka_consumer  # replaced, not revived


async def test_a_rebalance_hands_over_the_offsets_handled_so_far(scratch) -> None:  # type: ignore[no-untyped-def]
    """Offsets go to Kafka at most every ``consumer_offset_commit_interval_ms`` (5 s here); an
    instance that loses partitions to a new one sends what it has handled before the rebalance
    completes, so the new one starts after those records instead of handling them again."""
    first = [str(uuid.uuid4()) for _ in range(6)]
    later = [str(uuid.uuid4()) for _ in range(6)]
    handled_by: dict[str, list[str]] = {"a": [], "b": []}

    def handler_of(name: str) -> Handler[OrdenCompletada]:
        async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
            handled_by[name].append(event.saga_id)
            await uow.commit()
        return handler

    async def handled() -> set[str]:
        return set(handled_by["a"]) | set(handled_by["b"])

    settings = MessagingSettings(**config.kafka_fields(),
                                 consumer_offset_commit_interval_ms=5000)
    started: list[EventConsumer] = []
    async with _consuming(scratch, handler_of("a"), settings, started) as send:
        for i, saga_id in enumerate(first):
            await send(saga_id, i % 3)
        await wait_for(handled, lambda d: set(first) <= d, timeout=15, what="first six handled")
        # A second instance joins: the three partitions are shared out again.
        async with _consuming(scratch, handler_of("b"), settings, started) as send_too:
            for i, saga_id in enumerate(later):
                await send_too(saga_id, i % 3)
            await wait_for(handled, lambda d: set(later) <= d, timeout=30,
                           what="later six handled")
            assert started[1].kafka is not None
            assert started[1].kafka.assignment(), "the new instance took no partition"
    assert not set(first) & set(handled_by["b"]), "handed over without the offsets handled"
    assert sorted(handled_by["a"] + handled_by["b"]) == sorted(first + later)


async def test_a_record_with_a_nul_byte_is_parked_as_bytes_and_its_partition_goes_on(scratch) -> None:  # type: ignore[no-untyped-def]
    """Regression: an undecodable record whose value is UTF-8 with a NUL byte in it was written
    into the dead letter as text; PostgreSQL's jsonb refuses the NUL, the refusal was raised out
    of the lane, the consumer restarted onto the same record, and its partition never moved
    again. Such a record is parked as bytes — its value, key and headers in base64 — and the
    next record of the partition is handled."""
    engine, _ = scratch
    after = str(uuid.uuid4())
    done: set[str] = set()

    async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        done.add(event.saga_id)
        await uow.commit()

    async def handled() -> set[str]:
        return set(done)

    poison = b"\x00 not an envelope"
    key = b"key-\x00"
    headers = [("X-Message-ID", b"id-\x00"), ("X-Event-Type", b"OrdenCompletada"),
               ("X-Trace\x00", b"t")]
    settings = MessagingSettings(**config.kafka_fields())
    async with _consuming(scratch, handler, settings) as send:
        producer = AIOKafkaProducer(**config.kafka_client(), acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(TOPIC, poison, key=key, headers=headers, partition=0)
        finally:
            await producer.stop()
        await send(after, 0)
        await wait_for(handled, lambda d: after in d, timeout=30,
                       what="the record after the poison handled")
        [record] = await wait_for(lambda: _dead_letters(engine), lambda rows: len(rows) == 1,
                                  timeout=10, what="the poison dead-lettered")

    assert record["reason"] == "undecodable"
    original = record["original"]
    assert original["value"] == {"encoding": "base64",
                                 "data": base64.b64encode(poison).decode()}
    assert original["message_id"] == f"kafka:{TOPIC}:0:{original['offset']}", \
        "a header with a NUL in it names nothing"
    assert original["event_type"] == "OrdenCompletada"
    assert original["headers"] == {"X-Event-Type": "OrdenCompletada"}
    assert original["raw"]["key"] == base64.b64encode(key).decode()
    assert [(base64.b64decode(x["name"]), base64.b64decode(x["value"]))
            for x in original["raw"]["headers"]] == [(k.encode(), v) for k, v in headers]
    async with engine.connect() as conn:
        inbox = (await conn.execute(text(
            f"SELECT status FROM {SERVICE}.processed_messages WHERE message_id = :m"),
            {"m": original["message_id"]})).scalar()
    assert inbox == "dead_lettered"


async def test_a_twin_is_handled_when_the_version_first_claimed_was_dead_lettered(scratch) -> None:  # type: ignore[no-untyped-def]
    """One event in two versions (sagakit.twins): the first, claimed under its own id, cannot be
    handled and is dead-lettered under that id; its twin, which claims the same id, is not
    thrown away as a duplicate but handled, claimed under its own. A redelivery of the twin is
    then a duplicate."""
    engine, tables = scratch
    saga_id = str(uuid.uuid4())
    first = _event(saga_id)
    twin = {**_event(saga_id), "metadata": {"twin_of": first["message_id"]}}

    async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        if event.message_id == first["message_id"]:
            raise PermanentError("this version cannot be handled")
        # The handler's effect, written with its claim (rolled back with a duplicate's).
        await uow.connection.execute(text(
            f"INSERT INTO {SERVICE}.processed_messages (message_id, event_type, saga_id, status) "
            "VALUES (:m, 'Effect', :s, 'processed')"), {"m": str(uuid.uuid4()), "s": saga_id})
        await uow.commit()

    consumer = EventConsumer(service=SERVICE, topics=[TOPIC],
                             subscriptions=[Subscription(OrdenCompletada, handler)],
                             uow_factory=lambda **kw: UnitOfWork(engine, tables, SERVICE, **kw),
                             settings=MessagingSettings(**config.kafka_fields()),
                             origins={"OrdenCompletada": Origin(TOPIC, "pedidos")})

    def record(event: dict, offset: int) -> RawRecord:
        return RawRecord(TOPIC, 0, offset, saga_id.encode(), json.dumps(event).encode(), [])

    outcomes = [(await consumer.processor.process(record(e, i))).status
                for i, e in enumerate([first, twin, twin])]

    assert outcomes == ["dead_lettered", "processed", "duplicate"]
    async with engine.connect() as conn:
        rows = (await conn.execute(text(
            f"SELECT message_id, event_type, status FROM {SERVICE}.processed_messages "
            "WHERE saga_id = :s"), {"s": saga_id})).all()
    inbox = {m: status for m, event_type, status in rows if event_type != "Effect"}
    assert inbox == {first["message_id"]: "dead_lettered", twin["message_id"]: "processed"}
    assert sum(1 for _, event_type, _ in rows if event_type == "Effect") == 1
