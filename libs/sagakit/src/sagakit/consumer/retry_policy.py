"""What a handler's failure means for its record
(docs/standard.md#failures-retries-and-dead-letters): tried again at once (a lost race), later (a
transient failure with attempts left), never (a permanent failure, or the attempts used up: a dead
letter), or waited out (the database is away: never the record's fault, never a dead letter)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from sagakit.backoff import Backoff
from sagakit.errors import (
    CommitOutcomeUnknown,
    PermanentError,
    TransientError,
    is_connection_failure,
    sqlstate,
)
from sagakit.settings import MessagingSettings
from sagakit.store.conflicts import CONFLICT_SQLSTATES

# SQLSTATEs worth another try: serialization_failure, deadlock_detected, lock_not_available,
# query_canceled (statement_timeout).
RETRYABLE_SQLSTATES = {"40001", "40P01", "55P03", "57014"}
# serialization_failure and deadlock_detected: retried at once a few times before they count
# as an attempt, because under contention they are expected and resolve immediately.
MAX_QUICK_RETRIES = 20
# Between two tries at a record while the database is unreachable, and between two Kafka
# sessions of a consumer that keeps failing.
INFRASTRUCTURE_BACKOFF = Backoff(0.2, 2.0, 5.0)


class InfrastructureDown(Exception):
    """The database is unreachable: retry the record later, never dead-letter it for that."""


def classify(exc: BaseException) -> str:
    """'infrastructure', 'transient' or 'permanent'."""
    if isinstance(exc, CommitOutcomeUnknown):
        return "infrastructure"  # redelivered once the database is back; the inbox decides
    if isinstance(exc, TransientError):
        return "transient"
    if isinstance(exc, PermanentError):
        return "permanent"
    if sqlstate(exc) in RETRYABLE_SQLSTATES:  # SQLAlchemy's error or asyncpg's own
        return "transient"
    if is_connection_failure(exc) or isinstance(exc, asyncio.TimeoutError):
        return "infrastructure"  # a driver's connect timeout: the database is down
    return "permanent"


@dataclass(frozen=True)
class AtOnce:
    """Lost a race for a row lock under REPEATABLE READ: the other transaction has just
    committed, so try again after ``pause_s`` (not counted as an attempt)."""

    pause_s: float


@dataclass(frozen=True)
class Later:
    """A transient failure with attempts left: the record waits ``delay_s`` for its retry."""

    kind: str
    delay_s: float


@dataclass(frozen=True)
class GiveUp:
    """No more tries: the record is dead-lettered for ``reason``."""

    kind: str
    reason: str  # permanent | retries_exhausted


class RetryPolicy:
    def __init__(self, settings: MessagingSettings) -> None:
        self.backoff = Backoff(settings.retry_initial_backoff_s, settings.retry_backoff_factor,
                               settings.retry_max_backoff_s, settings.retry_jitter)
        self.max_attempts = settings.retry_max_attempts

    def after_failure(self, exc: Exception, attempt: int,
                      quick_retries: int) -> AtOnce | Later | GiveUp:
        """What follows attempt number ``attempt`` failing with ``exc``, ``quick_retries``
        races lost in it so far. Raises ``InfrastructureDown`` when the database is away."""
        kind = classify(exc)
        if kind == "infrastructure":
            raise InfrastructureDown(str(exc)) from exc
        if sqlstate(exc) in CONFLICT_SQLSTATES and quick_retries < MAX_QUICK_RETRIES:
            return AtOnce(random.uniform(0, 0.005 * (quick_retries + 1)))
        if kind == "permanent" or attempt >= self.max_attempts:
            return GiveUp(kind, "permanent" if kind == "permanent" else "retries_exhausted")
        return Later(kind, self.backoff.delay(attempt))
