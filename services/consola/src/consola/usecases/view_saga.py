"""A saga's timeline, and finding a saga from the id an operator has (a saga's or an order's)."""

from __future__ import annotations

import uuid

from consola.domain import timeline
from consola.usecases.ports import NotFound, SagaReads


class NotAnId(ValueError):
    """What was searched for is not a saga or order id (a UUID)."""


async def saga_timeline(reads: SagaReads, saga_id: str) -> timeline.Timeline:
    """Raises ``NotFound`` when pedidos knows no such saga."""
    status = await reads.saga_status(saga_id)
    history = await reads.saga_history(saga_id)
    payments = await reads.payments(saga_id)
    return timeline.build(saga_id, history, payments, status=status.get("status"),
                          order_id=status.get("order_id"), trace_id=status.get("trace_id"))


async def find_saga(reads: SagaReads, text: str) -> str | None:
    """The saga ``text`` names, as a saga id or as an order id; None when neither is known."""
    try:
        wanted = str(uuid.UUID(text.strip()))
    except ValueError:
        raise NotAnId(text) from None
    try:
        return str((await reads.saga_status(wanted))["saga_id"])
    except NotFound:
        pass
    try:
        return str((await reads.order(wanted))["saga_id"])
    except NotFound:
        return None
