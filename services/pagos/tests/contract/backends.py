"""The two implementations of pagos' payment stores (``PaymentStore``, ``PaymentWork``, opened
by ``PaymentUnits``) the contract suites run on, behind one face: ``MemoryPayments`` (the unit
tests' fakes) and ``PostgresPayments`` (``PaymentRepository`` on real units of work, on a
scratch copy of pagos' tables). Besides the ports, each answers what its commits put in the
outbox: the saga's events and the dead letters."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos.adapters.payment_repository import payment_units
from pagos.usecases.ports import PaymentStore, PaymentWork
from sagakit.ports import UnitOfWorkPort
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

from ..unit.fakes import FakeUnits, PaymentTable

TABLES = ("payments",)


class Payments(PaymentStore, PaymentWork, Protocol):
    """Both ports, on one unit of work, as pagos' repository gives them."""


class PaymentBackend(Protocol):
    def unit(self, *, reads_outside_transaction: bool = False
             ) -> AbstractAsyncContextManager[tuple[UnitOfWorkPort, Payments]]:
        """A unit of work with the payments on it (rolled back unless committed)."""
        ...

    async def outbox(self, key: str) -> list[str]:
        """The event types of the outbox rows under ``key`` (a saga id), in order."""
        ...


class MemoryPayments:
    def __init__(self) -> None:
        self.table = PaymentTable()
        self._units = FakeUnits(self.table)

    def unit(self, *, reads_outside_transaction: bool = False
             ) -> AbstractAsyncContextManager[tuple[UnitOfWorkPort, Payments]]:
        return self._units(reads_outside_transaction=reads_outside_transaction)

    async def outbox(self, key: str) -> list[str]:
        return [*(e.event_type for u in self._units.committed for e in u.emitted
                  if e.saga_id == key),
                *(d.event_type for d in self.table.dead_letters if d.key == key)]


class PostgresPayments:
    def __init__(self, engine: AsyncEngine, tables: MessagingTables) -> None:
        self.engine = engine
        self.tables = tables
        self._units = payment_units(
            lambda **options: UnitOfWork(engine, tables, "pagos", **options))

    def unit(self, *, reads_outside_transaction: bool = False
             ) -> AbstractAsyncContextManager[tuple[UnitOfWorkPort, Payments]]:
        return self._units(reads_outside_transaction=reads_outside_transaction)  # type: ignore[return-value]

    async def outbox(self, key: str) -> list[str]:
        async with self.engine.connect() as conn:
            return list((await conn.execute(text(
                f"SELECT event_type FROM {self.tables.schema}.outbox WHERE saga_id = :k "
                "ORDER BY id"), {"k": key})).scalars())
