"""A transaction that lost a race to another one is run again from the start.

PostgreSQL resolves a deadlock or a serialization failure by rolling one of the transactions
back whole: nothing of it was written, and its next run reads the state the winner left. So a
request path runs its unit of work again rather than answering 500 for a race the client did
not cause. Handlers of messages get the same from the consumer, which treats these SQLSTATEs
as transient.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sagakit.errors import sqlstate

T = TypeVar("T")
log = logging.getLogger("sagakit.conflicts")

# serialization_failure, deadlock_detected.
CONFLICT_SQLSTATES = frozenset({"40001", "40P01"})


class StillConflicting(Exception):
    """Lost the race every time it was run: the caller should try again later (HTTP 503)."""


def is_conflict(exc: BaseException) -> bool:
    return sqlstate(exc) in CONFLICT_SQLSTATES


async def retry_on_conflict(work: Callable[[], Awaitable[T]], *, what: str,
                            attempts: int = 5) -> T:
    """Runs ``work`` (a whole unit of work, from its first read to its commit) until it does not
    lose a race, at most ``attempts`` times; then raises ``StillConflicting``."""
    for attempt in range(1, attempts + 1):
        try:
            return await work()
        except Exception as exc:
            if not is_conflict(exc):
                raise
            log.info("%s lost a race (SQLSTATE %s), attempt %d of %d", what, sqlstate(exc),
                     attempt, attempts)
            if attempt == attempts:
                raise StillConflicting(what) from exc
            # Randomised, growing pause: the two that collided do not collide again in step.
            await asyncio.sleep(random.uniform(0, 0.005 * 2 ** attempt))
    raise AssertionError("unreachable")
