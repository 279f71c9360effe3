"""The unit of work's commit statement against real PostgreSQL: a unit of work whose only
statement is its commit statement sends no BEGIN and no COMMIT (the statement is its own
transaction); a staged write rides on it; its guard, finding nothing, leaves nothing written;
a message processed before fails the whole statement, business rows included; and a handler
that reads outside a transaction loses a race to a concurrent change instead of acting on
what it read."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import table, text
from sqlalchemy.ext.asyncio import AsyncEngine

from saga_harness import db
from saga_harness.scratch import scratch_outbox
from saga_harness.waiting import wait_for
from sagakit.errors import is_connection_failure
from sagakit.store.commit_statement import Part, StagedWrite, WriteShape
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import AlreadyProcessed, UnitOfWork

SCHEMA = "uowcommit"

# A business write for the tests: moves a counter from the value read to the next, only if it
# still holds the value read (the guard).
_COUNTERS = table("counters")
_BUMPED = Part("bumped", "UPDATE {counters} SET n = n + 1 "
                         "WHERE name = :c_name AND n = :c_seen RETURNING n", _COUNTERS)
_BUMP = WriteShape(_BUMPED, guard=_BUMPED)


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with scratch_outbox(SCHEMA, "uow-commit-events", 1) as (engine, tables):
        async with engine.begin() as conn:
            await conn.execute(text(f"CREATE TABLE {SCHEMA}.counters (name text PRIMARY KEY, "
                                    "n int NOT NULL)"))
        yield engine, tables


@pytest.fixture
def in_transaction_at_commit(scratch: tuple[AsyncEngine, MessagingTables],
                             monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each commit statement sent, whether the driver had a transaction open (a BEGIN
    sent before it), as asyncpg's protocol reports it. The unit of work sends that statement
    on asyncpg's connection itself."""
    seen: list[bool] = []
    fetch = asyncpg.Connection.fetch

    async def observed(self: asyncpg.Connection, query: str, *args: Any, **kw: Any) -> Any:
        if query.startswith("WITH") and "processed_messages" in query:
            seen.append(self.is_in_transaction())
        return await fetch(self, query, *args, **kw)

    monkeypatch.setattr(asyncpg.Connection, "fetch", observed)
    return seen


async def _counter(engine: AsyncEngine, name: str, n: int | None = None) -> int | None:
    async with engine.begin() as conn:
        if n is not None:
            await conn.execute(text(f"INSERT INTO {SCHEMA}.counters VALUES (:c, :n)"),
                               {"c": name, "n": n})
        return (await conn.execute(text(f"SELECT n FROM {SCHEMA}.counters WHERE name = :c"),
                                   {"c": name})).scalar_one_or_none()


async def _rows(engine: AsyncEngine, message_id: str, saga_id: str) -> tuple[int, int]:
    async with engine.connect() as conn:
        return tuple((await conn.execute(text(
            f"SELECT (SELECT count(*) FROM {SCHEMA}.processed_messages WHERE message_id = :m), "
            f"(SELECT count(*) FROM {SCHEMA}.outbox WHERE saga_id = :s)"),
            {"m": message_id, "s": saga_id})).one())


def _emit(uow: UnitOfWork, saga_id: str) -> None:
    uow.emit_raw(topic="uow-commit-events", key=saga_id, event_type="Bumped",
                 value={"saga": saga_id}, headers={})


def _bump(name: str, seen: int) -> StagedWrite:
    return StagedWrite(_BUMP, {"c_name": name, "c_seen": seen})


async def test_a_unit_of_work_with_nothing_before_its_commit_statement_sends_no_begin(
        scratch, in_transaction_at_commit) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    message_id, saga_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with UnitOfWork(engine, tables, SCHEMA) as uow:
        uow.claim(message_id, "Step", saga_id)
        _emit(uow, saga_id)
        assert await uow.commit()
    async with UnitOfWork(engine, tables, SCHEMA) as uow:  # one that reads first
        await uow.connection.execute(text("SELECT 1"))
        uow.claim(str(uuid.uuid4()), "Step", saga_id)
        _emit(uow, saga_id)
        assert await uow.commit()
    assert in_transaction_at_commit == [False, True]
    assert await _rows(engine, message_id, saga_id) == (1, 2)


async def test_a_staged_write_commits_with_the_inbox_and_outbox_rows(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    name, message_id, saga_id = f"c-{uuid.uuid4()}", str(uuid.uuid4()), str(uuid.uuid4())
    await _counter(engine, name, 5)
    async with UnitOfWork(engine, tables, SCHEMA) as uow:
        uow.claim(message_id, "Step", saga_id)
        uow.stage(_bump(name, 5))
        _emit(uow, saga_id)
        assert await uow.commit() and uow.committed
    assert await _counter(engine, name) == 6
    assert await _rows(engine, message_id, saga_id) == (1, 1)


@pytest.mark.parametrize("read_first", [False, True])
async def test_a_guard_that_finds_nothing_leaves_nothing_written(scratch, read_first: bool
                                                                 ) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    name, message_id, saga_id = f"c-{uuid.uuid4()}", str(uuid.uuid4()), str(uuid.uuid4())
    await _counter(engine, name, 5)
    async with UnitOfWork(engine, tables, SCHEMA) as uow:
        if read_first:
            await uow.connection.execute(text("SELECT 1"))
        uow.claim(message_id, "Step", saga_id)
        uow.stage(_bump(name, 4))  # decided on a value the counter no longer holds
        _emit(uow, saga_id)
        assert not await uow.commit()
        assert uow.ended and not uow.committed
    assert await _counter(engine, name) == 5
    assert await _rows(engine, message_id, saga_id) == (0, 0)


async def test_a_message_processed_before_fails_its_business_write_too(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    name, message_id, saga_id = f"c-{uuid.uuid4()}", str(uuid.uuid4()), str(uuid.uuid4())
    await _counter(engine, name, 0)
    for attempt in range(3):
        async with UnitOfWork(engine, tables, SCHEMA) as uow:
            uow.claim(message_id, "Step", saga_id)
            # An unguarded write: only the inbox row can stop it.
            uow.stage(StagedWrite(WriteShape(Part(
                "bumped", "UPDATE {counters} SET n = n + 1 WHERE name = :c_name RETURNING n",
                _COUNTERS)), {"c_name": name}))
            _emit(uow, saga_id)
            if attempt == 0:
                assert await uow.commit()
            else:
                with pytest.raises(AlreadyProcessed):
                    await uow.commit()
    assert await _counter(engine, name) == 1
    assert await _rows(engine, message_id, saga_id) == (1, 1)


async def test_reads_outside_a_transaction_lose_a_race_instead_of_acting_on_what_they_read(
        scratch, in_transaction_at_commit) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    name, message_id, saga_id = f"c-{uuid.uuid4()}", str(uuid.uuid4()), str(uuid.uuid4())
    await _counter(engine, name, 1)
    async with UnitOfWork(engine, tables, SCHEMA, reads_outside_transaction=True) as uow:
        seen = (await uow.connection.execute(
            text(f"SELECT n FROM {SCHEMA}.counters WHERE name = :c"), {"c": name})).scalar_one()
        async with engine.begin() as other:  # someone else moves it meanwhile
            await other.execute(text(f"UPDATE {SCHEMA}.counters SET n = 10 WHERE name = :c"),
                                {"c": name})
        uow.claim(message_id, "Step", saga_id)
        uow.stage(_bump(name, seen))
        _emit(uow, saga_id)
        assert not await uow.commit()
    assert await _counter(engine, name) == 10
    assert await _rows(engine, message_id, saga_id) == (0, 0)
    assert in_transaction_at_commit == [False]


async def test_a_connection_seen_closed_refuses_the_commit_statement_as_nothing_done(
        scratch) -> None:  # type: ignore[no-untyped-def]
    """A commit statement that is its own COMMIT and dies in flight leaves its outcome
    unknown; one on a connection already known dead is never sent: nothing was done, and the
    caller may say so (HTTP 503 "nothing was done", not "it may have taken effect")."""
    engine, tables = scratch
    message_id, saga_id = str(uuid.uuid4()), str(uuid.uuid4())
    uow = UnitOfWork(engine, tables, SCHEMA)
    async with uow:
        driver = (await uow.connection.get_raw_connection()).driver_connection
        await db.execute("SELECT pg_terminate_backend($1)", driver.get_server_pid())
        await wait_for(lambda: asyncio.sleep(0, driver.is_closed()), bool, timeout=10,
                       what="the client to see its connection closed")
        uow.claim(message_id, "Step", saga_id)
        _emit(uow, saga_id)
        with pytest.raises(ConnectionResetError):
            await uow.commit()
    assert is_connection_failure(ConnectionResetError())
    assert await _rows(engine, message_id, saga_id) == (0, 0)


async def test_a_guard_with_several_rows_claims_the_message_once(scratch) -> None:  # type: ignore[no-untyped-def]
    engine, tables = scratch
    prefix, message_id, saga_id = f"g-{uuid.uuid4()}", str(uuid.uuid4()), str(uuid.uuid4())
    await _counter(engine, f"{prefix}-a", 1)
    await _counter(engine, f"{prefix}-b", 1)
    async with UnitOfWork(engine, tables, SCHEMA) as uow:
        uow.claim(message_id, "Step", saga_id)
        bumped = Part("bumped", "UPDATE {counters} SET n = n + 1 "
                                "WHERE name LIKE :c_prefix || '%' RETURNING n", _COUNTERS)
        uow.stage(StagedWrite(WriteShape(bumped, guard=bumped), {"c_prefix": prefix}))
        _emit(uow, saga_id)
        assert await uow.commit()
    assert await _counter(engine, f"{prefix}-a") == 2 and await _counter(engine, f"{prefix}-b") == 2
    assert await _rows(engine, message_id, saga_id) == (1, 1)
