"""Reads of orders, sagas and their history for the API and the gauges, each on a connection
of its own: they decide nothing and write nothing, so no unit of work.

A read for a customer (``customer_id``) finds only that customer's orders and sagas: another's
is not found, as one that does not exist. Without one, it finds any (an operator's read)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from pedidos.adapters.tables import operator_actions, orders, saga_audit, sagas
from pedidos.domain.order import ACTIVE


class OrderQueries:
    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def order(self, order_id: uuid.UUID, customer_id: str | None = None
                    ) -> dict[str, Any] | None:
        query = select(orders).where(orders.c.order_id == order_id)
        if customer_id is not None:
            query = query.where(orders.c.customer_id == customer_id)
        row = (await self.conn.execute(query)).first()
        return dict(row._mapping) if row else None

    async def saga(self, saga_id: uuid.UUID, customer_id: str | None = None
                   ) -> dict[str, Any] | None:
        query = select(sagas).where(sagas.c.saga_id == saga_id)
        if customer_id is not None:
            query = query.where(sagas.c.order_id.in_(
                select(orders.c.order_id).where(orders.c.customer_id == customer_id)))
        row = (await self.conn.execute(query)).first()
        return dict(row._mapping) if row else None

    async def history(self, saga_id: uuid.UUID) -> list[dict[str, Any]]:
        rows = await self.conn.execute(select(saga_audit).where(saga_audit.c.saga_id == saga_id)
                                       .order_by(saga_audit.c.id))
        return [dict(r._mapping) for r in rows]

    async def operator_actions(self, saga_id: uuid.UUID) -> list[dict[str, Any]]:
        t = operator_actions
        rows = await self.conn.execute(select(t).where(t.c.saga_id == str(saga_id))
                                       .order_by(t.c.id))
        return [dict(r._mapping) for r in rows]

    async def active_stats(self) -> tuple[int, float]:
        """How many sagas are active and the largest fraction of its deadline one has used."""
        active = [s.value for s in ACTIVE]
        used = func.extract("epoch", func.now() - sagas.c.started_at) / func.nullif(
            func.extract("epoch", sagas.c.expires_at - sagas.c.started_at), 0)
        count, worst = (await self.conn.execute(
            select(func.count(), func.coalesce(func.max(used), 0))
            .where(sagas.c.status.in_(active)))).one()
        return int(count), float(worst)

