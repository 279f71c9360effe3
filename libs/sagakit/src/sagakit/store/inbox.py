"""Housekeeping of the idempotent inbox (``processed_messages``, Part I §5.2).

The claim itself is ``UnitOfWork.claim``: it belongs to the handler's transaction.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from sagakit.observability import metrics
from sagakit.store.tables import INBOX_DEAD_LETTERED, MessagingTables


async def cleanup_processed(engine: AsyncEngine, tables: MessagingTables, retention_days: float,
                            batch_size: int = 1000) -> int:
    """Deletes inbox rows older than the retention, in bounded batches; returns how many."""
    t = tables.processed_messages
    cutoff = func.now() - func.make_interval(0, 0, 0, 0, 0, 0, retention_days * 86400)
    removed = 0
    while True:
        keys = (select(t.c.message_id).where(t.c.processed_at < cutoff,
                                             t.c.status != INBOX_DEAD_LETTERED)
                .limit(batch_size).scalar_subquery())
        async with engine.begin() as conn:
            n = (await conn.execute(delete(t).where(t.c.message_id.in_(keys)))).rowcount
        removed += n
        if n < batch_size:
            return removed


async def refresh_dead_letter_gauge(engine: AsyncEngine, tables: MessagingTables,
                                    service: str) -> None:
    t = tables.processed_messages
    async with engine.connect() as conn:
        rows = (await conn.execute(select(t.c.event_type, func.count())
                                   .where(t.c.status == INBOX_DEAD_LETTERED)
                                   .group_by(t.c.event_type))).all()
    counts: dict[str, int] = {}
    for event_type, count in rows:
        label = metrics.event_type_label(event_type)
        counts[label] = counts.get(label, 0) + count
    for label, count in counts.items():
        metrics.DLQ_MESSAGES.labels(service, label).set(count)
