"""How a gateway call's outcome is recorded on its payment, for charges and refunds alike.

The outcome is decided first on the payment as the worker leased it for the call, and written
with the commit statement, guarded by the status it was decided on: one round trip and no
transaction held open, where a locked read-decide-write took five (BEGIN, lock, update,
commit statement, COMMIT) on every saga's critical path. If a cancellation moved the payment
meanwhile, nothing was written, and the outcome is decided again on the payment read as it is
now, as a lock would have made it wait and then decide.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pagos.domain import payment as domain
from pagos.domain.payment import Payment
from pagos.usecases import payment_events
from pagos.usecases.ports import CallOutcome, PaymentUnits, PaymentWork
from sagakit.observability import metrics
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("pagos.gateway_worker")
SERVICE = "pagos"

# How many times an outcome is decided again when the payment moved under it (a cancellation
# arriving while the call was in flight moves it once).
RECORD_TRIES = 5

Decide = Callable[[UnitOfWorkPort, PaymentWork, Payment], None]
"""Decides the outcome on the payment as it is given, and stages it (``record_outcome``) with
its events on the unit of work."""


def jittered(seconds: float) -> float:
    return seconds * (1 + random.uniform(-0.2, 0.2))


def outcome_of(change: domain.Change, *, attempt: dict[str, Any],
               lease_until: datetime | None, **fields: Any) -> CallOutcome:
    """What ``change`` writes on the payment, with the call's ``attempt`` for its log, the
    end of the call's lease, and the call's own ``fields`` (attempt count, ids).

    An outcome that changes nothing (the payment moved on while the call was in flight) does
    not schedule: it leaves the payment's next work to whatever moved it (a refund scheduled
    by a concurrent outcome must stay due). A new status keeps the token only while the charge
    may still have to be made or replayed, and marks the payment for a manual refund where
    finance must step in. The retry's jitter is decided now and stored, so a restart retries
    at the same instant."""
    status = change.status
    return CallOutcome(
        attempt=attempt, lease_until=lease_until,
        schedules=status is not None or change.retry_in_s is not None,
        retry_in_s=None if change.retry_in_s is None else jittered(change.retry_in_s),
        status=status, clear_token=status is not None and status not in domain.TOKEN_NEEDED,
        manual_refund_required=domain.manual_refund_required(status), **fields)


async def record(units: PaymentUnits, called_for: Payment, decide: Decide) -> None:
    """Writes a gateway call's outcome, decided by ``decide`` on the payment: first as it was
    ``called_for``, then, each time the payment had moved, as it is read now."""
    current: Payment | None = called_for
    for _ in range(RECORD_TRIES):
        async with units(reads_outside_transaction=True) as (uow, payments):
            if current is None:
                current = await payments.read(called_for.saga_id)
                assert current is not None
            decide(uow, payments, current)
            if await uow.commit():
                return
            current = None
    # Moved under every try: leave it leased. When the lease runs out the call is made
    # again, under the same idempotency key, and its outcome recorded then.
    log.warning("gateway outcome not recorded: the payment kept changing",
                extra={"saga_id": called_for.saga_id, "attempt": RECORD_TRIES})


def after(uow: UnitOfWorkPort, change: domain.Change, payment: Payment,
          kick: Callable[[], None]) -> None:
    """What follows the outcome's commit: the worker woken for a retry, an alert counted."""
    if change.retry_in_s is not None:
        uow.after_commit(kick)
    if change.alert:
        severity = "critical"
        alert = change.alert
        uow.after_commit(lambda: metrics.ALERTS.labels(SERVICE, alert, severity).inc())
        log.critical("payment alert: %s", alert,
                     extra={"saga_id": payment.saga_id, "status": "FAILED",
                            "alert": alert, "severity": severity})


def emit_refund_failed(uow: UnitOfWorkPort, payment: Payment, attempts: int,
                       detail: str) -> None:
    uow.emit(payment_events.fallo_reembolso(payment, attempts, detail or "refund failed"),
             saga_id=payment.saga_id)
