"""Read access to the services' schemas for assertions (as the admin role)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from saga_harness import config
from sagakit.store.tables import MessagingTables, messaging_tables, service_metadata


async def fetch(sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def fetchval(sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def execute(sql: str, *args: Any) -> str:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        return await conn.execute(sql, *args)
    finally:
        await conn.close()


async def kill_backend(pid: int) -> None:
    """Terminates one PostgreSQL backend (a pooled connection dies under its owner) and waits
    until it is gone."""
    from saga_harness.waiting import wait_for

    admin = await asyncpg.connect(config.admin_dsn())
    try:
        await admin.execute("SELECT pg_terminate_backend($1)", pid)

        async def alive() -> int:
            return int(await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid))
        await wait_for(alive, lambda n: n == 0, timeout=10, what=f"backend {pid} gone")
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def probe() -> AsyncIterator[AsyncConnection]:
    """A SQLAlchemy connection (admin role) inside a transaction that is always rolled back: a
    test changes rows to see what the code under test makes of them, and leaves nothing behind
    (the live stack never sees the changes, which are not committed)."""
    engine = create_async_engine(config.admin_dsn().replace("postgresql://",
                                                            "postgresql+asyncpg://"))
    try:
        async with engine.connect() as conn:
            await conn.begin()
            try:
                yield conn
            finally:
                await conn.rollback()
    finally:
        await engine.dispose()


@contextlib.asynccontextmanager
async def scratch_copy(schema: str, of: str, tables: tuple[str, ...]
                       ) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    """A copy of ``tables`` of service schema ``of`` in a new schema ``schema``, dropped on
    exit, and an engine (admin role) on which ``of``'s statements reach the copy (SQLAlchemy's
    schema_translate_map, which the unit of work and ``sagakit.store.driver`` honour): a service's
    code runs on it without the running stack seeing a row, nor its relay a notification."""
    engine = create_async_engine(config.admin_dsn().replace("postgresql://",
                                                            "postgresql+asyncpg://"))
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        await conn.execute(text(f"CREATE SCHEMA {schema}"))
        for table in tables:
            await conn.execute(text(
                f"CREATE TABLE {schema}.{table} (LIKE {of}.{table} INCLUDING ALL)"))
    try:
        yield (engine.execution_options(schema_translate_map={of: schema}),
               messaging_tables(service_metadata(schema)))
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        await engine.dispose()
