"""Records of one partition handled in one shared transaction, against real PostgreSQL.

Queued records whose handlers allow it share one transaction (one COMMIT); every record keeps
its own inbox row, outbox rows and failure handling. Which records committed together is read
from the inbox rows' ``xmin`` (the id of the transaction that wrote them). The handler here is
shaped like pedidos' saga tracker: it decides on what a cache says (or reads the row), writes
with one guarded statement, and remembers what it wrote only once that has committed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import TopicPartition
from sqlalchemy import table, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from saga_contracts.events.orders import OrdenCompletada
from saga_harness import config, fault_plugin
from saga_harness.kafka import envelope
from saga_harness.scratch import scratch_outbox
from saga_harness.waiting import wait_for
from sagakit.consumer import EventConsumer, Origin, RawRecord, Subscription
from sagakit.errors import PermanentError
from sagakit.message import Message
from sagakit.observability import metrics
from sagakit.settings import MessagingSettings
from sagakit.store.commit_statement import Part, StagedWrite, WriteShape
from sagakit.store.shared_transaction import SharedTransaction
from sagakit.store.tables import MessagingTables, messaging_tables, service_metadata
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "sharedtx"
TOPIC = "shared-tx-events"
TP = TopicPartition(TOPIC, 0)

_BUMPED = Part("bumped", "UPDATE {counters} SET n = n + 1 "
                         "WHERE name = :c_name AND n = :c_seen RETURNING n", table("counters"))
_BUMP = WriteShape(_BUMPED, guard=_BUMPED, returning=_BUMPED)


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with scratch_outbox(SCHEMA, TOPIC, 1) as (engine, tables):
        async with engine.begin() as conn:
            await conn.execute(text(f"CREATE TABLE {SCHEMA}.counters (name text PRIMARY KEY, "
                                    "n int NOT NULL)"))
        yield engine, tables


class Counters:
    """The handler under test and what it saw: bumps the counter named by the saga id."""

    def __init__(self, fail_on: set[str] | None = None) -> None:
        self.known: dict[str, int] = {}  # value after this process's last committed write
        self.committed: list[str] = []  # message ids, as after_commit saw them
        self.seen_committed: list[int] = []  # len(committed) when each handler call began
        self.fail_on = fail_on or set()

    async def handle(self, uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        self.seen_committed.append(len(self.committed))
        if event.message_id in self.fail_on:
            raise PermanentError("refused by the test")
        name = event.saga_id
        seen = self.known.get(name)
        if seen is None:
            seen = (await uow.connection.execute(text(
                f"SELECT n FROM {SCHEMA}.counters WHERE name = :c"), {"c": name})).scalar_one()
        uow.stage(StagedWrite(_BUMP, {"c_name": name, "c_seen": seen}))
        uow.emit_raw(topic=TOPIC, key=name, event_type="Bumped", value={"to": seen + 1},
                     headers={})

        def remember() -> None:
            self.known[name] = uow.returned[0]["n"]
            self.committed.append(event.message_id)
        uow.after_commit(remember)
        await uow.commit()
        if not uow.committed:
            self.known.pop(name, None)


def _consumer(scratch: tuple[AsyncEngine, MessagingTables], counters: Counters,
              batch_max: int = 32, lock_timeout_ms: int = 200) -> EventConsumer:
    engine, tables = scratch

    async def handler(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        await counters.handle(uow, event)
    return EventConsumer(
        service=SCHEMA, topics=[TOPIC],
        subscriptions=[Subscription(OrdenCompletada, handler, reads_outside_transaction=True,
                                    shares_transaction=True)],
        uow_factory=lambda **kw: UnitOfWork(engine, tables, SCHEMA, **kw),
        settings=MessagingSettings(consumer_batch_max=batch_max),
        shared_transaction=lambda: SharedTransaction(engine, tables, SCHEMA, lock_timeout_ms),
        origins={"OrdenCompletada": Origin(TOPIC, "pedidos")})


async def _records(engine: AsyncEngine, names: list[str]) -> list[RawRecord]:
    async with engine.begin() as conn:
        for name in set(names):
            await conn.execute(text(f"INSERT INTO {SCHEMA}.counters VALUES (:c, 0)"),
                               {"c": name})
    return _built(names)


def _built(names: list[str], partition: int = 0) -> list[RawRecord]:
    """A record per counter name (the saga id), offsets from 0."""
    records = []
    for offset, name in enumerate(names):
        value = envelope("OrdenCompletada", {"order_id": str(uuid.uuid4()),
                                             "total_amount": "1.00", "currency": "USD"},
                         saga_id=name, source="pedidos")
        records.append(RawRecord(TOPIC, partition, offset, name.encode(),
                                 json.dumps(value).encode(), []))
    return records


def _message_id(record: RawRecord) -> str:
    return str(json.loads(record.value or b"")["message_id"])


async def _transactions(engine: AsyncEngine, records: list[RawRecord]) -> list[int]:
    """For each record, a number naming the transaction that wrote its inbox row (the same
    number for records committed together), in record order."""
    async with engine.connect() as conn:
        rows = dict((await conn.execute(text(
            f"SELECT message_id::text, xmin::text FROM {SCHEMA}.processed_messages"))).all())
    order: dict[str, int] = {}
    return [order.setdefault(rows[_message_id(r)], len(order)) for r in records]


async def _counters(engine: AsyncEngine, names: list[str]) -> list[int]:
    async with engine.connect() as conn:
        values = dict((await conn.execute(text(f"SELECT name, n FROM {SCHEMA}.counters"))).all())
    return [values[name] for name in names]


async def _outbox_count(engine: AsyncEngine, topic: str) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text(
            f"SELECT count(*) FROM {SCHEMA}.outbox WHERE topic = :t"), {"t": topic})).scalar_one())


def _shared(outcome: str) -> float:
    return metrics.SHARED_TRANSACTIONS.labels(SCHEMA, outcome)._value.get()


async def test_queued_records_share_one_transaction_each_with_its_own_inbox_and_outbox_rows(
        scratch) -> None:  # type: ignore[no-untyped-def]
    engine, _ = scratch
    counters = Counters()
    names = [str(uuid.uuid4()) for _ in range(6)]
    records = await _records(engine, names)
    consumer = _consumer(scratch, counters, batch_max=4)

    assert await consumer.partitions.handle(TP, records) is None

    assert await _transactions(engine, records) == [0, 0, 0, 0, 1, 1]
    assert await _counters(engine, names) == [1] * 6
    assert await _outbox_count(engine, TOPIC) == 6
    # What waits for the commit ran after the shared COMMIT, not after each record's statement.
    assert counters.seen_committed == [0, 0, 0, 0, 4, 4]
    assert counters.committed == [_message_id(r) for r in records]
    assert consumer.offsets.pending[TP] == len(records)


async def test_a_duplicate_among_them_is_a_duplicate_and_the_others_are_written_once(
        scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    counters = Counters()
    names = [str(uuid.uuid4()) for _ in range(6)]
    records = await _records(engine, names)
    async with UnitOfWork(engine, tables, SCHEMA) as uow:  # record 3 was processed before
        uow.claim(_message_id(records[2]), "OrdenCompletada", names[2])
        await uow.commit()
    consumer = _consumer(scratch, counters)
    rolled_back = _shared("rolled_back")

    assert await consumer.partitions.handle(TP, records) is None

    assert _shared("rolled_back") == rolled_back + 1
    # After a duplicate every record of the run goes alone: redelivered records come in runs.
    assert len(set(await _transactions(engine, records))) == 6
    assert await _counters(engine, names) == [1, 1, 0, 1, 1, 1]
    assert await _outbox_count(engine, TOPIC) == 5
    assert _message_id(records[2]) not in counters.committed


async def test_a_record_whose_state_moved_ends_the_shared_transaction_and_is_decided_again(
        scratch) -> None:  # type: ignore[no-untyped-def]
    engine, _ = scratch
    counters = Counters()
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    # The second event of ``a`` is decided on the cache, which learns of the first one's write
    # only when the shared transaction commits: its guard finds the counter moved.
    names = [b, a, a, c, c]
    records = await _records(engine, names)
    counters.known[a] = 0
    consumer = _consumer(scratch, counters)

    assert await consumer.partitions.handle(TP, records) is None

    transactions = await _transactions(engine, records)
    assert transactions[0] == transactions[1]
    assert len(set(transactions)) == 3  # [b, a] together, the second a alone, then [c, c]
    assert transactions[3] == transactions[4] != transactions[2]
    assert await _counters(engine, [a, b, c]) == [2, 1, 2]
    assert await _outbox_count(engine, TOPIC) == 5


async def test_a_failing_record_is_judged_alone_and_nothing_else_is_lost(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, _ = scratch
    names = [str(uuid.uuid4()) for _ in range(6)]
    records = await _records(engine, names)
    counters = Counters(fail_on={_message_id(records[2])})
    consumer = _consumer(scratch, counters)

    assert await consumer.partitions.handle(TP, records) is None

    assert await _counters(engine, names) == [1, 1, 0, 1, 1, 1]
    assert await _outbox_count(engine, TOPIC) == 5
    assert await _outbox_count(engine, f"{SCHEMA}-dlq") == 1
    transactions = await _transactions(engine, records)  # the dead letter has its inbox row
    assert transactions[3] == transactions[4] == transactions[5]
    assert len(set(transactions)) == 4
    assert consumer.offsets.pending[TP] == len(records)


async def test_a_lock_held_past_the_lock_timeout_rolls_back_instead_of_waiting(scratch) -> None:  # type: ignore[no-untyped-def]
    """Two shared transactions can wait for each other's locks; a lock wait longer than the
    lock timeout ends the shared one, whose records then go alone. Here the lock's holder lets
    go only once it has seen the shared transaction roll back: without the timeout, neither
    would ever finish."""
    engine, _ = scratch
    counters = Counters()
    names = [str(uuid.uuid4()) for _ in range(4)]
    records = await _records(engine, names)
    consumer = _consumer(scratch, counters, lock_timeout_ms=100)
    rolled_back = _shared("rolled_back")

    async with engine.connect() as holder:
        await holder.execute(text(f"SELECT n FROM {SCHEMA}.counters WHERE name = :c FOR UPDATE"),
                             {"c": names[1]})
        handling = asyncio.create_task(consumer.partitions.handle(TP, records))

        async def rolled_back_count() -> float:
            return _shared("rolled_back")
        await wait_for(rolled_back_count, lambda n: n == rolled_back + 1, timeout=10,
                       what="the shared transaction rolled back at the lock timeout")
        await holder.commit()
    assert await asyncio.wait_for(handling, 30) is None
    assert await _counters(engine, names) == [1, 1, 1, 1]
    assert consumer.offsets.pending[TP] == len(records)


async def test_two_lanes_with_the_same_sagas_in_opposite_orders_never_wait_for_each_other(
        scratch) -> None:  # type: ignore[no-untyped-def]
    """Lane A holds saga x and comes to y; lane B holds y and comes to x. Left to PostgreSQL,
    each would wait for the other's lock until the lock timeout (3 s here) rolled one back.
    The lanes see each other's sagas: each commits what it has, and waits for the other to
    end instead of for a lock."""
    engine, _ = scratch
    x, y, z = (str(uuid.uuid4()) for _ in range(3))
    lane_a = await _records(engine, [x, z, y])
    lane_b = _built([y, x], partition=1)
    # Both lanes reach their second saga only once each holds its first one.
    both_hold = asyncio.Barrier(2)
    firsts = {_message_id(lane_a[0]), _message_id(lane_b[0])}
    counters = Counters()
    handle = counters.handle

    async def handle_after_barrier(uow: UnitOfWork, event: Message[OrdenCompletada]) -> None:
        await handle(uow, event)
        if event.message_id in firsts:
            firsts.discard(event.message_id)
            await asyncio.wait_for(both_hold.wait(), 10)
    counters.handle = handle_after_barrier  # type: ignore[method-assign]
    consumer = _consumer(scratch, counters, lock_timeout_ms=3000)
    rolled_back = _shared("rolled_back")

    results = await asyncio.wait_for(asyncio.gather(
        consumer.partitions.handle(TopicPartition(TOPIC, 0), lane_a),
        consumer.partitions.handle(TopicPartition(TOPIC, 1), lane_b)), 30)

    assert results == [None, None]
    assert _shared("rolled_back") == rolled_back, "a lane waited for the other's lock"
    assert await _counters(engine, [x, y, z]) == [2, 2, 1]
    assert consumer.shared_runs.idle


def _child_main() -> None:
    """In a process of its own: handles the records in ``SHARED_TX_RECORDS`` (JSON) as the
    consumer does, with the fault plugin's ``SAGA_FAULT_CRASH_AFTER_COMMIT`` set: SIGKILL after
    the commit."""
    async def main() -> None:
        engine = create_async_engine(
            config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://"))
        tables = messaging_tables(service_metadata(SCHEMA))
        records = [RawRecord(TOPIC, 0, r["offset"], r["key"].encode(), r["value"].encode(), [])
                   for r in json.loads(os.environ["SHARED_TX_RECORDS"])]
        await _consumer((engine, tables), Counters()).partitions.handle(TP, records)
    asyncio.run(main())


async def test_killed_between_the_shared_commit_and_the_offset_the_records_come_again_once(
        scratch) -> None:  # type: ignore[no-untyped-def]
    """kill -9 right after a shared COMMIT, before any offset is recorded: every record is
    delivered again, and each one's inbox row absorbs its copy."""
    engine, _ = scratch
    names = [str(uuid.uuid4()) for _ in range(4)]
    records = await _records(engine, names)
    env = {**os.environ, **fault_plugin.env(crash_after_commit="OrdenCompletada"),
           "SHARED_TX_RECORDS": json.dumps([{"offset": r.offset, "key": (r.key or b"").decode(),
                                             "value": (r.value or b"").decode()}
                                            for r in records])}
    child = ("import importlib.util\n"
             f"spec = importlib.util.spec_from_file_location('shared_tx', {__file__!r})\n"
             "module = importlib.util.module_from_spec(spec)\n"
             "spec.loader.exec_module(module)\n"
             "module._child_main()\n")
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", child], env=env,
                                   capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    # The four were committed together before the kill.
    assert await _transactions(engine, records) == [0, 0, 0, 0]
    assert await _counters(engine, names) == [1] * 4

    consumer = _consumer(scratch, Counters())  # the restarted consumer: all of them again
    assert await consumer.partitions.handle(TP, records) is None

    assert await _counters(engine, names) == [1] * 4
    assert await _outbox_count(engine, TOPIC) == 4
    assert await _transactions(engine, records) == [0, 0, 0, 0]
    assert consumer.offsets.pending[TP] == len(records)


def test_only_a_handler_that_reads_outside_a_transaction_may_share_one() -> None:
    async def locking(uow: Any, event: Message[OrdenCompletada]) -> None:
        return None
    with pytest.raises(ValueError, match="cannot share a transaction"):
        Subscription(OrdenCompletada, locking, isolation_level="REPEATABLE READ",
                     shares_transaction=True)
    with pytest.raises(ValueError, match="cannot share a transaction"):
        Subscription(OrdenCompletada, locking, shares_transaction=True)
    shared = SharedTransaction(None, None, "s", 100)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="may share a transaction"):
        UnitOfWork(None, None, "s", within=shared)  # type: ignore[arg-type]
