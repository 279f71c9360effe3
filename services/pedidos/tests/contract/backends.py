"""The two implementations of pedidos' storage ports (``OrderStore``, ``Deadlines``) the contract
suites run on, behind one face: ``MemoryOrders`` (the unit tests' fakes) and ``PostgresOrders``
(``OrderRepository`` on a real unit of work, ``DeadlineSchedule``, on a scratch copy of
pedidos' tables). Besides the ports, each answers what a test must see of the tables that no
port reads (history, notifications, operator actions, the outbox) and plays another
transaction holding a saga's lock."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pedidos.adapters.deadline_schedule import DeadlineSchedule
from pedidos.adapters.order_repository import OrderRepository
from pedidos.usecases.ports import Deadlines, OrderStore
from sagakit.ports import UnitOfWorkPort
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

from ..unit.fakes import FakeDeadlines, FakeUnits, OrderTables

TABLES = ("orders", "sagas", "saga_audit", "notifications", "operator_actions")
HISTORY = ("event_type", "actor", "from_status", "to_status", "message_id", "detail")
ORDER = ("status", "charge_id", "refund_status", "cancel_reason", "idempotency_key",
         "request_hash", "card_fingerprint")


class OrderBackend(Protocol):
    def unit(self) -> AbstractAsyncContextManager[tuple[UnitOfWorkPort, OrderStore]]:
        """A unit of work with the order store on it (rolled back unless committed)."""
        ...

    def deadlines(self) -> Deadlines:
        ...

    async def history(self, saga_id: str) -> list[tuple[Any, ...]]:
        """The saga's history entries (``HISTORY``), oldest first."""
        ...

    async def order(self, saga_id: str) -> dict[str, Any] | None:
        """The saga's order row (``ORDER``), None when there is none."""
        ...

    async def notifications(self, saga_id: str) -> list[tuple[str, str]]:
        """(kind, message) of the customer's notifications of the saga's order."""
        ...

    async def operator_actions(self, saga_id: str) -> list[tuple[str, str, str | None]]:
        """(operator, action, reason) of the actions recorded on the saga."""
        ...

    async def outbox(self, saga_id: str) -> list[str]:
        """The types of the saga's events committed to the outbox, in order."""
        ...

    def held(self, saga_id: str) -> AbstractAsyncContextManager[None]:
        """Another transaction holds the saga's lock meanwhile."""
        ...


class MemoryOrders:
    def __init__(self) -> None:
        self.tables = OrderTables()
        self._units = FakeUnits(self.tables)

    def unit(self) -> AbstractAsyncContextManager[tuple[UnitOfWorkPort, OrderStore]]:
        return self._units()

    def deadlines(self) -> Deadlines:
        return FakeDeadlines(self.tables)

    async def history(self, saga_id: str) -> list[tuple[Any, ...]]:
        return [tuple(getattr(h, c) for c in HISTORY) for h in self.tables.history_of(saga_id)]

    async def order(self, saga_id: str) -> dict[str, Any] | None:
        found = [o for o in self.tables.orders.values() if o.saga_id == saga_id]
        return {c: getattr(found[0], c) for c in ORDER} if found else None

    async def notifications(self, saga_id: str) -> list[tuple[str, str]]:
        orders = {o.order_id for o in self.tables.orders.values() if o.saga_id == saga_id}
        return [(n.kind, n.message) for n in self.tables.notifications if n.order_id in orders]

    async def operator_actions(self, saga_id: str) -> list[tuple[str, str, str | None]]:
        return [(a.operator, a.action, a.reason) for s, a in self.tables.operator_actions
                if s == saga_id]

    async def outbox(self, saga_id: str) -> list[str]:
        return [e.event_type for e in self.tables.outbox if e.saga_id == saga_id]

    @contextlib.asynccontextmanager
    async def held(self, saga_id: str) -> AsyncIterator[None]:
        self.tables.held.add(saga_id)
        try:
            yield
        finally:
            self.tables.held.discard(saga_id)


class PostgresOrders:
    def __init__(self, engine: AsyncEngine, tables: MessagingTables) -> None:
        self.engine = engine
        self.tables = tables
        self.schema = tables.schema

    @contextlib.asynccontextmanager
    async def unit(self) -> AsyncIterator[tuple[UnitOfWorkPort, OrderStore]]:
        async with UnitOfWork(self.engine, self.tables, "pedidos") as uow:
            yield uow, OrderRepository(uow)

    def deadlines(self) -> Deadlines:
        return DeadlineSchedule(self.engine)

    async def _rows(self, sql: str, saga_id: str, *, as_text: bool = False) -> list[Any]:
        """``sql``'s rows for the saga (``:s``: a uuid, or its text for a text column)."""
        async with self.engine.connect() as conn:
            return list((await conn.execute(
                text(sql.replace("{schema}", self.schema)),
                {"s": saga_id if as_text else uuid.UUID(saga_id)})).all())

    async def history(self, saga_id: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in await self._rows(
            f"SELECT {', '.join(HISTORY)} FROM {{schema}}.saga_audit WHERE saga_id = :s "
            "ORDER BY id", saga_id)]

    async def order(self, saga_id: str) -> dict[str, Any] | None:
        rows = await self._rows(f"SELECT {', '.join(ORDER)} FROM {{schema}}.orders "
                                "WHERE saga_id = :s", saga_id)
        return dict(rows[0]._mapping) if rows else None

    async def notifications(self, saga_id: str) -> list[tuple[str, str]]:
        return [(r.kind, r.message) for r in await self._rows(
            "SELECT n.kind, n.message FROM {schema}.notifications n JOIN {schema}.orders o "
            "USING (order_id) WHERE o.saga_id = :s ORDER BY n.id", saga_id)]

    async def operator_actions(self, saga_id: str) -> list[tuple[str, str, str | None]]:
        return [(r.operator, r.action, r.reason) for r in await self._rows(
            "SELECT operator, action, reason FROM {schema}.operator_actions "
            "WHERE saga_id = :s ORDER BY id", saga_id, as_text=True)]

    async def outbox(self, saga_id: str) -> list[str]:
        return [r.event_type for r in await self._rows(
            "SELECT event_type FROM {schema}.outbox WHERE saga_id = :s ORDER BY id",
            saga_id, as_text=True)]

    @contextlib.asynccontextmanager
    async def held(self, saga_id: str) -> AsyncIterator[None]:
        async with self.engine.connect() as conn:
            await conn.execute(text(f"SELECT 1 FROM {self.schema}.sagas WHERE saga_id = :s "
                                    "FOR UPDATE"), {"s": uuid.UUID(saga_id)})
            try:
                yield
            finally:
                await conn.rollback()
