"""The reservations' durable timer: each RESERVED row carries its deadline (``expires_at``, by
the database clock), and this job, run by the instances that run jobs, marks those past it
EXPIRED, then sleeps until the earliest deadline left (bounded by its interval).

Nothing waits for it: availability counts only reservations whose deadline is ahead, so an
expired reservation stops holding units at its deadline, marked or not. Marking them keeps the
record straight (a saga's reservation shows how it ended) and counts them. Each row is marked
once, whoever else runs the job at the same time; a cancel or a confirm that changed a row
first keeps it as it left it.
"""

from __future__ import annotations

import logging

from inventario import metrics
from inventario.metrics import ReservationOutcome
from inventario.usecases.ports import ReservationDeadlines

log = logging.getLogger("inventario.expire_reservations")

# Past a deadline by this much before waking: the database clock decides, not ours.
_MARGIN_S = 0.05


async def expire_reservations(deadlines: ReservationDeadlines, *, interval_s: float,
                              batch: int = 500) -> float:
    """Marks the reservations past their deadline EXPIRED; seconds until it is due again."""
    while True:
        expired = await deadlines.expire_due(batch)
        for reservation in expired:
            log.info("reservation expired: %s units of %s", reservation.quantity,
                     reservation.sku, extra={"saga_id": reservation.saga_id})
        if expired:
            metrics.RESERVATIONS.labels("inventario", ReservationOutcome.EXPIRED).inc(
                len(expired))
        if len(expired) < batch:
            break
    seconds = await deadlines.seconds_to_next()
    if seconds is None:
        return interval_s
    return min(interval_s, max(0.0, seconds) + _MARGIN_S)
