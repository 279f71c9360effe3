"""When sagas fall due: the deadline scanner's reads (``Deadlines`` of pedidos.usecases.ports),
judged by the database clock, the one the deadlines were written by."""

from __future__ import annotations

import uuid

from sqlalchemy import func, literal_column, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pedidos.adapters.order_queries import OrderQueries
from pedidos.adapters.tables import sagas
from pedidos.domain.order import ACTIVE
from pedidos.usecases.ports import DueSagas

# The active statuses written into the SQL rather than bound: the deadline indexes are partial
# ("WHERE status IN (...active...)"), and a generic plan with bound statuses cannot prove that
# it only needs those rows.
_ACTIVE = sagas.c.status.in_([literal_column(f"'{s.value}'") for s in sorted(ACTIVE)])


async def due_sagas(conn: AsyncConnection, limit: int) -> list[str]:
    rows = await conn.execute(
        select(sagas.c.saga_id)
        .where(_ACTIVE,
               (sagas.c.step_deadline_at <= func.now()) | (sagas.c.expires_at <= func.now()))
        .order_by(sagas.c.step_deadline_at).limit(limit))
    return [str(r.saga_id) for r in rows]


async def seconds_to_next_deadline(conn: AsyncConnection) -> float | None:
    """How long until the earliest deadline still to come falls due (None: there is none),
    by the database clock, which is the one the deadlines are judged by."""
    step = (select(func.min(sagas.c.step_deadline_at))
            .where(_ACTIVE, sagas.c.step_deadline_at > func.now()).scalar_subquery())
    saga = (select(func.min(sagas.c.expires_at))
            .where(_ACTIVE, sagas.c.expires_at > func.now()).scalar_subquery())
    seconds = (await conn.execute(
        select(func.extract("epoch", func.least(step, saga) - func.now())))).scalar_one()
    return None if seconds is None else float(seconds)


class DeadlineSchedule:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def due(self, limit: int) -> DueSagas:
        async with self.engine.connect() as conn:
            due = await due_sagas(conn, limit)
            # A full batch: more may be due now, and the next deadline is not worth a read.
            next_due_s = await seconds_to_next_deadline(conn) if len(due) < limit else 0.0
        return DueSagas(due, next_due_s)

    async def traceparent_of(self, saga_id: str) -> str | None:
        async with self.engine.connect() as conn:
            stored = await OrderQueries(conn).saga(uuid.UUID(saga_id))
        traceparent = (stored or {}).get("context", {}).get("traceparent")
        return None if traceparent is None else str(traceparent)
