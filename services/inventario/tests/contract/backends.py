"""The two implementations of inventario's store ports (``StockStore``, ``ProductStore``) the
contract suites run on, behind one face: ``MemoryStock`` (the unit tests' fake) and
``PostgresStock`` (``StockRepository`` on a real unit of work, on a scratch copy of inventario's
tables). Besides the ports, each answers which events a saga committed to the outbox and plays
an operator deleting a product, which no port does."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from inventario.adapters.reservation_deadlines import ReservationDeadlineStore
from inventario.adapters.stock_repository import StockRepository
from inventario.usecases.ports import ProductStore, ReservationDeadlines, StockStore
from saga_harness.waiting import wait_for
from sagakit.envelope import Envelope
from sagakit.ports import UnitOfWorkPort
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

from ..unit.fakes import (
    FakeReservationDeadlines,
    FakeStockRepository,
    Inventory,
    StagingUnitOfWork,
)

TABLES = ("products", "stock_checks", "allocations", "reservations")


class Stores(StockStore, ProductStore, Protocol):
    """Both ports, on one unit of work, as inventario's repository gives them."""


class StockBackend(Protocol):
    def unit(self) -> AbstractAsyncContextManager[tuple[UnitOfWorkPort, Stores]]:
        """A unit of work with the stores on it (rolled back unless committed)."""
        ...

    async def outbox(self, saga_id: str) -> list[str]:
        """The types of the saga's events committed to the outbox, in order."""
        ...

    async def delete_product(self, sku: str) -> None:
        """The product deleted, committed (as an operator would, outside the saga)."""
        ...

    async def until_waiting_for_a_lock(self) -> None:
        """Returns once another task of the test waits for a lock held here."""
        ...

    def deadlines(self) -> ReservationDeadlines:
        """The reservations' deadlines, as the expiry job sees them."""
        ...


class MemoryStock:
    def __init__(self) -> None:
        self.inventory = Inventory()
        self._outbox: list[Envelope] = []

    @contextlib.asynccontextmanager
    async def unit(self) -> AsyncIterator[tuple[UnitOfWorkPort, Stores]]:
        uow = StagingUnitOfWork()
        yield uow, FakeStockRepository(self.inventory, uow)
        if uow.committed:
            self._outbox.extend(uow.emitted)
        else:
            uow.rollback()

    async def outbox(self, saga_id: str) -> list[str]:
        return [e.event_type for e in self._outbox if e.saga_id == saga_id]

    async def delete_product(self, sku: str) -> None:
        for table in (self.inventory.products, self.inventory.prices,
                      self.inventory.updated_at):
            table.pop(sku, None)

    async def until_waiting_for_a_lock(self) -> None:
        await asyncio.sleep(0)  # the other task runs until it awaits the lock's release

    def deadlines(self) -> ReservationDeadlines:
        return FakeReservationDeadlines(self.inventory)


class PostgresStock:
    def __init__(self, engine: AsyncEngine, tables: MessagingTables) -> None:
        self.engine = engine
        self.tables = tables

    @contextlib.asynccontextmanager
    async def unit(self) -> AsyncIterator[tuple[UnitOfWorkPort, Stores]]:
        async with UnitOfWork(self.engine, self.tables, "inventario") as uow:
            yield uow, StockRepository(uow)

    async def outbox(self, saga_id: str) -> list[str]:
        async with self.engine.connect() as conn:
            return list((await conn.execute(text(
                f"SELECT event_type FROM {self.tables.schema}.outbox WHERE saga_id = :s "
                "ORDER BY id"), {"s": saga_id})).scalars())

    async def delete_product(self, sku: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(text(f"DELETE FROM {self.tables.schema}.products WHERE sku = :s"),
                               {"s": sku})

    async def until_waiting_for_a_lock(self) -> None:
        async def waiting() -> int:
            async with self.engine.connect() as conn:
                return int((await conn.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE :copy"),
                    {"copy": f"%{self.tables.schema}.%"})).scalar_one())
        await wait_for(waiting, lambda n: n > 0, timeout=10, what="a statement waits for a lock")

    def deadlines(self) -> ReservationDeadlines:
        return ReservationDeadlineStore(self.engine, self.tables.schema)
