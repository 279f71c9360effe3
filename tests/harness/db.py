"""Read access to the services' schemas for assertions (as the admin role)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from harness import config


async def fetch(sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        return await conn.fetch(sql, *args)  # type: ignore[no-any-return]
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
        return await conn.execute(sql, *args)  # type: ignore[no-any-return]
    finally:
        await conn.close()


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
