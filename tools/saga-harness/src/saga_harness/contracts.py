"""Contract suites: a port's documented behaviour written once as tests, run against every
store that implements it (the in-memory fake of the unit tests and the PostgreSQL repository),
as the ``eventsourcing`` library runs one suite over every persistence backend.

A suite's backend fixture is parametrised with ``BACKENDS`` and opens its backend with
``backend``: ``memory`` runs in ``make test-unit``; ``postgresql`` is marked ``stack`` and asks
for ``running_stack``, so it runs with the stack and fails, never skips, when PostgreSQL cannot
be had. Its repository works on ``scratch``: a copy of the service's tables in a schema of its
own, dropped after the test, which the running services never read.

    @pytest.fixture(params=BACKENDS)
    async def orders(request: pytest.FixtureRequest) -> AsyncIterator[OrderBackend]:
        async with backend(request, "pedidos", TABLES, MemoryOrders, PostgresOrders) as b:
            yield b
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from saga_harness import db
from sagakit.store.tables import MessagingTables

MEMORY = "memory"
POSTGRESQL = "postgresql"
BACKENDS = [MEMORY, pytest.param(POSTGRESQL, marks=pytest.mark.stack)]
"""The ``params`` of a suite's backend fixture."""

MESSAGING_TABLES = ("outbox", "processed_messages")

B = TypeVar("B")


@contextlib.asynccontextmanager
async def scratch(request: pytest.FixtureRequest, service: str, tables: tuple[str, ...]
                  ) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    """The running stack (started if it is not: a part that cannot start fails the test), and
    a copy of ``service``'s ``tables`` and messaging tables on which its statements run."""
    request.getfixturevalue("running_stack")
    async with db.scratch_copy(f"{service}_contract", service,
                               (*tables, *MESSAGING_TABLES)) as copy:
        yield copy


@contextlib.asynccontextmanager
async def backend(request: pytest.FixtureRequest, service: str, tables: tuple[str, ...],
                  memory: Callable[[], B],
                  postgresql: Callable[[AsyncEngine, MessagingTables], B]) -> AsyncIterator[B]:
    """The backend ``request.param`` names: ``memory()``, or ``postgresql`` on a ``scratch``
    copy of ``service``'s ``tables``."""
    if request.param == MEMORY:
        yield memory()
        return
    async with scratch(request, service, tables) as (engine, messaging):
        yield postgresql(engine, messaging)
