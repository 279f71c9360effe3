"""What a service is made of (``ServiceDefinition``, written by each service's composition root,
with its ``PeriodicJob``s) and what it has once running (``Runtime``, built in the app's
lifespan)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy.ext.asyncio import AsyncEngine

from sagakit.consumer import EventConsumer, Subscription
from sagakit.outbox.relay import OutboxRelay
from sagakit.runtime.settings import ServiceSettings
from sagakit.settings import MessagingSettings
from sagakit.store.shared_transaction import SharedTransaction
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork


@dataclass
class Runtime:
    name: str
    engine: AsyncEngine
    tables: MessagingTables
    settings: MessagingSettings
    service_settings: ServiceSettings
    relay: OutboxRelay
    consumer: EventConsumer | None = None

    def uow(self, isolation_level: str | None = None,
            reads_outside_transaction: bool = False) -> UnitOfWork:
        return UnitOfWork(self.engine, self.tables, self.name, isolation_level=isolation_level,
                          reads_outside_transaction=reads_outside_transaction,
                          signal=self.relay.signal)

    def shared_transaction(self) -> SharedTransaction:
        return SharedTransaction(self.engine, self.tables, self.name,
                                 self.settings.consumer_batch_lock_timeout_ms,
                                 signal=self.relay.signal)


@dataclass(frozen=True)
class RunAgainIn:
    """What a periodic job may return: when its next work falls due, if sooner than its
    interval (a job that reads deadlines from a table knows the earliest one)."""

    seconds: float


@dataclass(frozen=True)
class PeriodicJob:
    """Runs ``run`` every ``interval_s``, or sooner when it returns ``RunAgainIn``."""

    name: str
    interval_s: float
    run: Callable[[Runtime], Awaitable[Any]]


@dataclass
class ServiceDefinition:
    name: str
    tables: MessagingTables
    subscriptions: Callable[[Runtime], Sequence[Subscription[Any]]]
    """The events the service handles, and how (built once the runtime is); the consumer reads
    the topics they are published on."""
    routers: list[APIRouter]
    jobs: list[PeriodicJob] = field(default_factory=list)
    on_start: Callable[[Runtime], Awaitable[None]] | None = None
    on_stop: Callable[[Runtime], Awaitable[None]] | None = None
    description: str = ""
    saga_types: Sequence[str] = ()
    """The sagas the service takes part in (the standard's ``tipo_de_saga``): the
    ``saga_type`` label of ``saga_duration_seconds``, exposed at zero from its start."""
    metrics_at_zero: Callable[[str], None] | None = None
    """Creates the service's own series at zero, called with its name as the app starts: its
    own metrics, and the standard's that carry its own reasons (``saga_compensations_total``).
    An alert on ``increase()`` misses a series whose first sample is 1."""
    database_settings: Callable[[], dict[str, str]] = dict
    """PostgreSQL settings for every connection of the service (``statement_timeout``...),
    read when the service starts."""


def runtime_of(request: Request) -> Runtime:
    return request.app.state.runtime
