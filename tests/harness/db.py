"""Read access to the services' schemas for assertions (as the admin role)."""

from __future__ import annotations

from typing import Any

import asyncpg

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
