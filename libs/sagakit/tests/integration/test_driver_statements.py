"""Statements sent on asyncpg's connection (``sagakit.store.driver``) against real PostgreSQL: they
mean what they would mean through SQLAlchemy. A statement that has to begin its transaction
(a lock that must last) still goes through SQLAlchemy; inside a transaction or in autocommit
it goes to the driver; values the statement carries itself are sent; and a connection that
dies under one is kept out of the pool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Column, Integer, MetaData, Table, Text, bindparam, literal, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from saga_harness import config, db
from saga_harness.waiting import wait_for
from sagakit.errors import is_connection_failure
from sagakit.store import driver
from sagakit.store.database import build_engine


def _url() -> str:
    # Read when a test runs: the stack generates the password at its start, which may be
    # after this module is collected.
    return config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://")
SCHEMA = "drivertest"
items = Table("items", MetaData(schema=SCHEMA), Column("name", Text, primary_key=True),
              Column("n", Integer, nullable=False))
_LOCK = select(items.c.name, items.c.n).where(items.c.name == bindparam("name")).with_for_update()
_READ = select(items.c.n, literal(7).label("seven")).where(items.c.name == bindparam("name"))


@pytest.fixture
async def engine(running_stack: None) -> AsyncIterator[AsyncEngine]:
    engine = build_engine(_url(), "driver-test", 2)
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        await conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
        await conn.run_sync(items.metadata.create_all)
        await conn.execute(items.insert().values(name="a", n=1))
    try:
        yield engine
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP SCHEMA {SCHEMA} CASCADE"))
        await engine.dispose()


@pytest.fixture
def sent_to_driver(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    fetch = asyncpg.Connection.fetch

    async def observed(self: asyncpg.Connection, query: str, *args: Any, **kw: Any) -> Any:
        seen.append(query)
        return await fetch(self, query, *args, **kw)

    monkeypatch.setattr(asyncpg.Connection, "fetch", observed)
    return seen


async def _locked_elsewhere(name: str) -> bool:
    other = await asyncpg.connect(config.admin_dsn())
    try:
        await other.execute(f"SELECT 1 FROM {SCHEMA}.items WHERE name = $1 FOR UPDATE NOWAIT",
                            name)
        return False
    except asyncpg.LockNotAvailableError:
        return True
    finally:
        await other.close()


async def test_a_lock_that_begins_the_transaction_lasts_until_its_end(
        engine: AsyncEngine, sent_to_driver: list[str]) -> None:
    async with engine.connect() as conn:
        rows = await driver.fetch(conn, _LOCK, {"name": "a"})
        assert [(r["name"], r["n"]) for r in rows] == [("a", 1)]
        # Sent alone on the driver, the statement would have been its own transaction and
        # its lock gone with it.
        assert sent_to_driver == []
        assert await _locked_elsewhere("a")
        # Inside the transaction SQLAlchemy began, statements go to the driver.
        again = await driver.fetch(conn, _LOCK, {"name": "a"})
        assert [r["n"] for r in again] == [1]
        assert len(sent_to_driver) == 1
        await conn.rollback()
    assert not await _locked_elsewhere("a")


async def test_in_autocommit_a_read_goes_to_the_driver_with_the_values_it_carries(
        engine: AsyncEngine, sent_to_driver: list[str]) -> None:
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        rows = await driver.fetch(conn, _READ, {"name": "a"})
        assert [(r["n"], r["seven"]) for r in rows] == [(1, 7)]
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None and not raw.is_in_transaction()
    assert len(sent_to_driver) == 1


async def test_a_statement_with_an_in_list_is_refused_rather_than_compiled_wrong() -> None:
    with pytest.raises(ValueError, match="expanding"):
        driver.compiled(select(items.c.n).where(items.c.name.in_(["a", "b"])))


async def test_a_connection_that_dies_under_a_statement_leaves_the_pool(
        engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        pid = (await driver.fetch(conn, select(text("pg_backend_pid() AS pid")), {}))[0]["pid"]
        await db.kill_backend(pid)
        with pytest.raises(Exception) as failure:
            await driver.fetch(conn, _READ, {"name": "a"})
        assert is_connection_failure(failure.value), repr(failure.value)
        assert conn.invalidated
    # Both connections of the pool are handed out again, neither of them the dead one.
    async with engine.connect() as c1, engine.connect() as c2:
        pids = {(await c.execute(text("SELECT pg_backend_pid()"))).scalar_one()
                for c in (c1, c2)}
    assert pid not in pids


@pytest.mark.parametrize("setting", ["statement_timeout", "lock_timeout"])
@pytest.mark.parametrize("path", ["driver", "sqlalchemy"])
async def test_a_statement_or_lock_timeout_is_the_statements_failure_not_a_lost_connection(
        engine: AsyncEngine, setting: str, path: str) -> None:
    """A statement cancelled by its timeout, as asyncpg raises it (QueryCanceledError is one
    of its OperatorInterventionErrors, the class of a server shutting sessions down) or as
    SQLAlchemy wraps it: the statement's failure, on a connection that is fine."""
    async with engine.connect() as holder, engine.connect() as conn:
        await holder.execute(_LOCK, {"name": "a"})
        await conn.execute(text(f"SET LOCAL {setting} = '100ms'"))
        with pytest.raises(Exception) as failure:
            if path == "driver":
                await driver.fetch(conn, _LOCK, {"name": "a"})
            else:
                await conn.execute(_LOCK, {"name": "a"})
        assert not is_connection_failure(failure.value), repr(failure.value)
        await conn.rollback()
        assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
        await holder.rollback()


async def test_a_session_the_server_ended_for_idling_in_a_transaction_is_a_lost_connection(
        engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        await conn.execute(text("SET LOCAL idle_in_transaction_session_timeout = '200ms'"))
        pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()

        async def backends() -> int:
            return int(await db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                                         pid))
        await wait_for(backends, lambda n: n == 0, timeout=10,
                       what="the server ended the idle transaction's session")
        with pytest.raises(Exception) as failure:
            await conn.execute(text("SELECT 1"))
        assert is_connection_failure(failure.value), repr(failure.value)


async def test_the_driver_of_a_connected_connection_is_found_without_a_greenlet(
        engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every saga step asks for the driver; SQLAlchemy's ``get_raw_connection`` spawns a
    greenlet each time: 10 % of inventario's running samples under load. Once connected,
    the driver is read directly; an invalidated connection still goes through SQLAlchemy,
    which connects again."""
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        expected = (await conn.get_raw_connection()).driver_connection
        spawned: list[str] = []
        get_raw = type(conn).get_raw_connection

        async def observed(self: Any) -> Any:
            spawned.append("get_raw_connection")
            return await get_raw(self)

        monkeypatch.setattr(type(conn), "get_raw_connection", observed)
        assert await driver.driver_of(conn) is expected
        assert spawned == []

        pid = (await driver.fetch(conn, select(text("pg_backend_pid() AS pid")), {}))[0]["pid"]
        await conn.invalidate()
        fresh = await driver.driver_of(conn)
        assert spawned == ["get_raw_connection"]
        assert fresh is not expected and not fresh.is_closed()
        assert (await fresh.fetchval("SELECT pg_backend_pid()")) != pid
