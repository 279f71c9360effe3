"""Housekeeping of the outbox: published rows deleted past their retention, and its gauges.

The relay publishes; what is left of the rows it published (kept for ``outbox_retention_days``
for inspection) and the gauges of what waits are the periodic jobs' (``sagakit.runtime.jobs``).
"""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from saga_contracts.topics import dead_letter_topic
from sagakit.observability import metrics
from sagakit.store.tables import OUTBOX_FAILED, OUTBOX_PENDING, OUTBOX_PUBLISHED, MessagingTables


async def refresh_outbox_gauges(engine: AsyncEngine, tables: MessagingTables,
                                service: str) -> None:
    o = tables.outbox
    async with engine.connect() as conn:
        pending, oldest = (await conn.execute(
            select(func.count(), func.min(o.c.created_at)).where(o.c.status == OUTBOX_PENDING)
        )).one()
        failed = (await conn.execute(
            select(func.count()).where(o.c.status == OUTBOX_FAILED))).scalar_one()
        db_now = (await conn.execute(select(func.now()))).scalar_one()
    metrics.OUTBOX_PENDING.labels(service).set(pending)
    metrics.OUTBOX_FAILED.labels(service).set(failed)
    metrics.OUTBOX_OLDEST_AGE.labels(service).set(
        (db_now - oldest).total_seconds() if oldest else 0)


async def cleanup_published(engine: AsyncEngine, tables: MessagingTables, retention_days: float,
                            batch_size: int = 1000) -> int:
    """Deletes published rows past their retention, in bounded batches; returns how many. Dead
    letters are not among them: they stay until an operator archives them, and then for
    ``dead_letter_retention_days`` (``sagakit.operations.dead_letter_actions``)."""
    o = tables.outbox
    removed = 0
    cutoff = func.now() - func.make_interval(0, 0, 0, 0, 0, 0, retention_days * 86400)
    while True:
        ids = (select(o.c.id).where(o.c.status == OUTBOX_PUBLISHED, o.c.published_at < cutoff,
                                    o.c.topic != dead_letter_topic(tables.schema))
               .limit(batch_size).scalar_subquery())
        async with engine.begin() as conn:
            n = (await conn.execute(delete(o).where(o.c.id.in_(ids)))).rowcount
        removed += n
        if n < batch_size:
            return removed
