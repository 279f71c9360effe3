"""The backend every contract suite of pagos' payment stores runs on: the in-memory fakes, and
the PostgreSQL repository on a scratch copy of pagos' tables (``saga_harness.contracts``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from saga_harness.contracts import BACKENDS, backend

from .backends import TABLES, MemoryPayments, PaymentBackend, PostgresPayments


@pytest.fixture(params=BACKENDS)
async def payments(request: pytest.FixtureRequest) -> AsyncIterator[PaymentBackend]:
    async with backend(request, "pagos", TABLES, MemoryPayments, PostgresPayments) as chosen:
        yield chosen
