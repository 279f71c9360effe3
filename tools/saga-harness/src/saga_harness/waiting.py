"""Waiting on conditions with deadlines: never a fixed sleep as synchronisation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class ConditionNotMet(AssertionError):
    pass


async def current(value: T) -> T:
    """``value`` as a probe for ``wait_for``: ``wait_for(lambda: current(x.count), ...)``."""
    return value


async def wait_for(probe: Callable[[], Awaitable[T]], accept: Callable[[T], bool], *,
                   timeout: float, what: str, interval: float = 0.05) -> T:
    """Polls ``probe`` until ``accept`` says yes; fails with the last value seen."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if accept(last):
            return last
        if time.monotonic() > deadline:
            raise ConditionNotMet(f"{what}: not met within {timeout}s; last value: {last!r}")
        await asyncio.sleep(interval)
