"""Housekeeping of the idempotent inbox (``processed_messages``, docs/standard.md#idempotent-consumers).

The claim itself is ``UnitOfWork.claim``: it belongs to the handler's transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from sagakit.observability import metrics
from sagakit.store.tables import INBOX_DEAD_LETTERED, MessagingTables


def _older_than(days: float) -> Any:
    return func.now() - func.make_interval(0, 0, 0, 0, 0, 0, days * 86400)


async def cleanup_processed(engine: AsyncEngine, tables: MessagingTables, retention_days: float,
                            batch_size: int = 1000,
                            dead_letter_retention_days: float | None = None) -> int:
    """Deletes inbox rows older than the retention, in bounded batches; returns how many.
    Dead-lettered rows have a retention of their own, longer (an operator looks at them, and
    ``dlq_messages_total`` counts them): ``dead_letter_retention_days``, or kept when None.
    Past it the row goes, and a redelivery of its message would be handled again, as one of
    a processed row past its retention would; the letter itself stays in the DLQ topic."""
    t = tables.processed_messages
    due = and_(t.c.processed_at < _older_than(retention_days),
               t.c.status != INBOX_DEAD_LETTERED)
    if dead_letter_retention_days is not None:
        due = or_(due, and_(t.c.processed_at < _older_than(dead_letter_retention_days),
                            t.c.status == INBOX_DEAD_LETTERED))
    removed = 0
    while True:
        keys = (select(t.c.message_id).where(due).limit(batch_size).scalar_subquery())
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
    # A label whose rows were all purged (or replayed away) reads 0, not its last count.
    for label in _reported.get(service, set()) - counts.keys():
        metrics.DLQ_MESSAGES.labels(service, label).set(0)
    for label, count in counts.items():
        metrics.DLQ_MESSAGES.labels(service, label).set(count)
    _reported[service] = _reported.get(service, set()) | counts.keys()


_reported: dict[str, set[str]] = {}
