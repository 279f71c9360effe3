"""The backend every contract suite of inventario's stores runs on: the in-memory fake, and the
PostgreSQL repository on a scratch copy of inventario's tables (``saga_harness.contracts``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from saga_harness.contracts import BACKENDS, backend

from .backends import TABLES, MemoryStock, PostgresStock, StockBackend


@pytest.fixture(params=BACKENDS)
async def stock(request: pytest.FixtureRequest) -> AsyncIterator[StockBackend]:
    async with backend(request, "inventario", TABLES, MemoryStock, PostgresStock) as chosen:
        yield chosen
