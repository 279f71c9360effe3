"""Context managers that inject a fault and always undo it."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Iterator

import asyncpg
import httpx

from netproxy.layout import CONTROL_PORT
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


@contextlib.asynccontextmanager
async def behind_proxy(parts: list[str]) -> AsyncIterator[str]:
    """Starts the TCP proxy of tools/netproxy as a part of the stack and restarts ``parts``
    (instances: ``pedidos``, ``pedidos-2``) so that they reach PostgreSQL, Kafka and the
    gateway through it, each instance through routes of its own (``netproxy.layout``); yields
    its control API's address. On the way out every fault is cleared, the parts restarted as
    they were and the proxy stopped (its ports are free again for proxies of other tests)."""
    control = f"http://127.0.0.1:{CONTROL_PORT}"
    await asyncio.to_thread(stack.start, "netproxy")
    try:
        # All at once: each restart waits for its part's readiness (seconds), and the
        # instances' migrations are serialised by the service itself.
        await asyncio.gather(*(asyncio.to_thread(stack.restart, part, {"SAGA_NETPROXY": "1"})
                               for part in parts))
        yield control
    finally:
        with contextlib.suppress(httpx.HTTPError):
            async with httpx.AsyncClient(timeout=5) as http:
                await http.delete(f"{control}/faults")
        await asyncio.gather(*(asyncio.to_thread(stack.restart, part) for part in parts))
        await asyncio.to_thread(stack.stop, "netproxy")
