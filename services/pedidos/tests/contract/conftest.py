"""The backend every contract suite of pedidos' storage runs on: the in-memory fakes, and the
PostgreSQL adapters on a scratch copy of pedidos' tables (``saga_harness.contracts``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from saga_harness.contracts import BACKENDS, backend

from .backends import TABLES, MemoryOrders, OrderBackend, PostgresOrders


@pytest.fixture(params=BACKENDS)
async def orders(request: pytest.FixtureRequest) -> AsyncIterator[OrderBackend]:
    async with backend(request, "pedidos", TABLES, MemoryOrders, PostgresOrders) as chosen:
        yield chosen
