"""The unit of work against real PostgreSQL: the outbox rows of one saga get their ids in
commit order, so the relay (which publishes pending rows by id) can never send a later event
of a saga before an earlier one that committed late."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from saga_harness.scratch import scratch_outbox
from saga_harness.waiting import wait_for
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import AlreadyProcessed, UnitOfWork

SCHEMA = "uowtest"


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with scratch_outbox(SCHEMA, "uow-test-events", 1) as made:
        yield made


class _CommitHeldBack:
    """The unit of work's connection, with COMMIT held until released (a slow commit)."""

    def __init__(self, conn: AsyncConnection, written: asyncio.Event, release: asyncio.Event):
        self._conn, self._written, self._release = conn, written, release

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def commit(self) -> None:
        self._written.set()  # the outbox row is in, its transaction still open
        await self._release.wait()
        await self._conn.commit()


class _SlowUnitOfWork(UnitOfWork):
    """A unit of work that read something first, so that its transaction is open before its
    commit statement and its COMMIT is a round trip of its own, which the test holds back."""

    written: asyncio.Event
    release: asyncio.Event

    async def __aenter__(self) -> UnitOfWork:
        await super().__aenter__()
        await super().connection.execute(text("SELECT 1"))
        return self

    @property
    def connection(self) -> Any:
        return _CommitHeldBack(super().connection, self.written, self.release)


async def _emit(uow: UnitOfWork, saga_id: str, seq: int) -> None:
    async with uow:
        uow.emit_raw(topic="uow-test-events", key=saga_id, event_type="Step",
                     value={"seq": seq}, headers={})
        await uow.commit()


async def test_a_sagas_next_event_waits_for_the_one_before_to_commit(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    saga_id = str(uuid.uuid4())
    slow = _SlowUnitOfWork(engine, tables, SCHEMA)
    slow.written, slow.release = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(_emit(slow, saga_id, 0))
    second: asyncio.Task[None] | None = None
    try:
        await asyncio.wait_for(slow.written.wait(), 10)
        second = asyncio.create_task(_emit(UnitOfWork(engine, tables, SCHEMA), saga_id, 1))

        async def waiting_on_advisory_lock() -> int:
            async with engine.connect() as conn:
                return int((await conn.execute(text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND NOT granted"))).scalar_one())
        # The second transaction of the saga is held at its lock, before it draws an id.
        await wait_for(waiting_on_advisory_lock, lambda n: n >= 1, timeout=10,
                       what="the saga's second event waiting for the first to commit")
        assert not second.done()
    finally:
        slow.release.set()
        await first
        if second is not None:
            await second
    async with engine.connect() as conn:
        seqs = (await conn.execute(text(
            f"SELECT array_agg((payload->>'seq')::int ORDER BY id) FROM {SCHEMA}.outbox "
            "WHERE saga_id = :s"), {"s": saga_id})).scalar_one()
    assert seqs == [0, 1]


async def test_rows_of_several_sagas_in_one_commit_keep_their_order(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    sagas = [str(uuid.uuid4()) for _ in range(3)]
    uow = UnitOfWork(engine, tables, SCHEMA)
    async with uow:
        for seq, saga_id in enumerate(sagas * 2):
            uow.emit_raw(topic="uow-test-events", key=saga_id, event_type="Step",
                         value={"seq": seq, "nested": {"amount": "9.99"}},
                         headers={"X-Saga-ID": saga_id})
        await uow.commit()
    async with engine.connect() as conn:
        rows = (await conn.execute(text(
            f"SELECT saga_id, payload, headers, status FROM {SCHEMA}.outbox "
            "WHERE saga_id = ANY(:s) ORDER BY id"), {"s": sagas})).all()
    assert [r.payload["seq"] for r in rows] == list(range(6))
    assert [r.saga_id for r in rows] == sagas * 2
    assert all(r.payload["nested"] == {"amount": "9.99"} and r.status == "pending"
               and r.headers == {"X-Saga-ID": r.saga_id} for r in rows)


async def _handled(uow: UnitOfWork, message_id: str, saga_id: str) -> str:
    """A handler's unit of work: claim, one outbox row, commit; 'duplicate' if refused."""
    try:
        async with uow:
            uow.claim(message_id, "Step", saga_id)
            uow.emit_raw(topic="uow-test-events", key=saga_id, event_type="Step",
                         value={"message": message_id}, headers={})
            await uow.commit()
    except AlreadyProcessed:
        return "duplicate"
    return "processed"


async def _written(engine: AsyncEngine, message_id: str) -> tuple[int, int]:
    async with engine.connect() as conn:
        return tuple((await conn.execute(text(
            f"SELECT (SELECT count(*) FROM {SCHEMA}.processed_messages WHERE message_id = :m), "
            f"(SELECT count(*) FROM {SCHEMA}.outbox WHERE payload->>'message' = :m)"),
            {"m": message_id})).one())


async def test_a_message_claimed_before_is_refused_at_commit_and_writes_nothing(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    message_id, saga_id = str(uuid.uuid4()), str(uuid.uuid4())
    assert await _handled(UnitOfWork(engine, tables, SCHEMA), message_id, saga_id) == "processed"
    for _ in range(2):
        assert await _handled(UnitOfWork(engine, tables, SCHEMA), message_id,
                              saga_id) == "duplicate"
    assert await _written(engine, message_id) == (1, 1)


async def test_two_deliveries_in_flight_at_once_commit_once(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    message_id, saga_id = str(uuid.uuid4()), str(uuid.uuid4())
    slow = _SlowUnitOfWork(engine, tables, SCHEMA)
    slow.written, slow.release = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(_handled(slow, message_id, saga_id))
    second: asyncio.Task[str] | None = None
    try:
        await asyncio.wait_for(slow.written.wait(), 10)  # claimed and written, not committed

        async def waiting_for_a_lock() -> int:
            async with engine.connect() as conn:
                return int((await conn.execute(text(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted"))).scalar_one())
        second = asyncio.create_task(_handled(UnitOfWork(engine, tables, SCHEMA), message_id,
                                              saga_id))
        await wait_for(waiting_for_a_lock, lambda n: n >= 1, timeout=10,
                       what="the second delivery waiting for the first to commit")
        assert not second.done()
    finally:
        slow.release.set()
        outcomes = [await first] + ([await second] if second is not None else [])
    assert outcomes == ["processed", "duplicate"]
    assert await _written(engine, message_id) == (1, 1)


async def test_the_isolation_level_comes_with_begin_and_does_not_stay_on_the_connection(
        scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch

    async def level(uow: UnitOfWork) -> str:
        async with uow:
            return str((await uow.connection.execute(text("SHOW transaction_isolation"))
                        ).scalar_one())

    assert await level(UnitOfWork(engine, tables, SCHEMA, isolation_level="REPEATABLE READ")
                       ) == "repeatable read"
    for _ in range(3):  # whichever pooled connection comes next
        assert await level(UnitOfWork(engine, tables, SCHEMA)) == "read committed"
