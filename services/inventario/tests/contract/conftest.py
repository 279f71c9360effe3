"""The backend every contract suite of inventario's stores runs on: the in-memory fake, and the
PostgreSQL repository on a scratch copy of inventario's tables (``saga_harness.contracts``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from saga_harness.contracts import BACKENDS, MEMORY, scratch

from .backends import TABLES, MemoryStock, PostgresStock, StockBackend


@pytest.fixture(params=BACKENDS)
async def stock(request: pytest.FixtureRequest) -> AsyncIterator[StockBackend]:
    if request.param == MEMORY:
        yield MemoryStock()
        return
    async with scratch(request, "inventario", TABLES) as (engine, tables):
        yield PostgresStock(engine, tables)
