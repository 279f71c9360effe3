"""Context managers that inject a fault and always undo it."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator, Iterator

import asyncpg

from saga_harness import config, stack


@contextlib.contextmanager
def paused(part: str) -> Iterator[None]:
    """SIGSTOP the part's processes; SIGCONT on the way out."""
    stack.signal_part(part, signal.SIGSTOP)
    try:
        yield
    finally:
        stack.signal_part(part, signal.SIGCONT)


@contextlib.contextmanager
def reconfigured(part: str, env: dict[str, str]) -> Iterator[None]:
    """Restarts the part with extra settings, and restarts it as it was afterwards."""
    stack.restart(part, env)
    try:
        yield
    finally:
        stack.restart(part)


@contextlib.asynccontextmanager
async def row_locked(sql: str, *args: object) -> AsyncIterator[asyncpg.Connection]:
    """Holds row locks (``SELECT … FOR UPDATE``) in an open transaction; commits on exit."""
    conn = await asyncpg.connect(config.admin_dsn())
    tx = conn.transaction()
    await tx.start()
    try:
        await conn.fetch(sql, *args)
        yield conn
        await tx.commit()
    except BaseException:
        await tx.rollback()
        raise
    finally:
        await conn.close()
