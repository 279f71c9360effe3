"""The reservations' deadlines on PostgreSQL (``ReservationDeadlines``), for the expiry job:
each call its own transaction on the engine."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from inventario.adapters.tables import products, reservations
from inventario.usecases.ports import ExpiredReservation

# The expiry job's: RESERVED rows past their deadline, oldest first, each marked EXPIRED once
# (SKIP LOCKED: two instances at once take different rows, and the status re-checked on the row
# as it is updated keeps a row a cancel or a confirm changed meanwhile as they left it). A row
# whose product is locked is left for the next run: an allocation that holds the product, or
# waits for it, may be about to confirm it (it took the units the reservation held), and
# marking it EXPIRED under that allocation would leave the row saying the units went back.
_EXPIRE_DUE = f"""UPDATE {{schema}}.{reservations.name} AS r
SET status = 'EXPIRED', updated_at = now()
FROM (SELECT d.saga_id, d.sku FROM {{schema}}.{reservations.name} AS d
      JOIN {{schema}}.{products.name} AS p ON p.sku = d.sku
      WHERE d.status = 'RESERVED' AND d.expires_at <= now()
      ORDER BY d.expires_at
      LIMIT :k_limit
      FOR UPDATE OF d SKIP LOCKED
      FOR KEY SHARE OF p SKIP LOCKED) AS due
WHERE r.saga_id = due.saga_id AND r.sku = due.sku AND r.status = 'RESERVED'
RETURNING r.saga_id, r.sku, r.quantity"""
_NEXT_DEADLINE = f"""SELECT extract(epoch FROM min(expires_at) - now()) AS seconds
FROM {{schema}}.{reservations.name} WHERE status = 'RESERVED'"""


class ReservationDeadlineStore:
    """``ReservationDeadlines`` on the engine: each call its own transaction."""

    def __init__(self, engine: AsyncEngine, schema: str = "inventario") -> None:
        self.engine = engine
        self._expire = text(_EXPIRE_DUE.replace("{schema}", f'"{schema}"'))
        self._next = text(_NEXT_DEADLINE.replace("{schema}", f'"{schema}"'))

    async def expire_due(self, limit: int) -> list[ExpiredReservation]:
        async with self.engine.begin() as conn:
            rows = (await conn.execute(self._expire, {"k_limit": limit})).all()
        return [ExpiredReservation(r.saga_id, r.sku, r.quantity) for r in rows]

    async def seconds_to_next(self) -> float | None:
        async with self.engine.connect() as conn:
            seconds = (await conn.execute(self._next)).scalar()
        return None if seconds is None else float(seconds)
