"""How a gateway call's outcome is recorded on its payment, for charges and refunds alike.

The outcome is decided first on the payment as the worker leased it for the call, and written
with the commit statement, guarded by the status it was decided on: one round trip and no
transaction held open, where a locked read-decide-write took five (BEGIN, lock, update,
commit statement, COMMIT) on every saga's critical path. If a cancellation moved the payment
meanwhile, nothing was written, and the outcome is decided again on the payment read as it is
now, as a lock would have made it wait and then decide.

pagos failing around a call is recorded like a gateway that does not answer: an exception
making the call or reading its reply is the call's unknown outcome, counted against the call's
attempts and retried on its schedule, so the payment ends where a gateway that never answers
leaves it (CHARGE_FAILED, REFUND_FAILED), never in a call made again for ever with nothing
recorded. An outcome that cannot be written is tried once more; then an unknown one is recorded
as unknown (only while the call holds its lease: the failed commit may have gone through), and
a sure answer of the gateway is left for the call to learn again when its lease runs out
(``record_or_unknown``). Each failure is logged without the exception's text unmasked and
counted in ``saga_gateway_worker_errors_total``.
"""

from __future__ import annotations

import logging
import random
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pagos import metrics as pagos_metrics
from pagos.domain import payment as domain
from pagos.domain.payment import Payment
from pagos.metrics import GatewayCall, Stage
from pagos.usecases import payment_events
from pagos.usecases.ports import CallOutcome, PaymentUnits, PaymentWork
from sagakit.observability import metrics
from sagakit.observability.privacy import MASK, scrub
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("pagos.gateway_worker")
SERVICE = "pagos"

# How many times an outcome is decided again when the payment moved under it (a cancellation
# arriving while the call was in flight moves it once).
RECORD_TRIES = 5

Decide = Callable[[UnitOfWorkPort, PaymentWork, Payment], None]
"""Decides the outcome on the payment as it is given, and stages it (``record_outcome``) with
its events on the unit of work."""

# How much of an exception's text the attempt log keeps.
_ERROR_CHARS = 300


def jittered(seconds: float) -> float:
    return seconds * (1 + random.uniform(-0.2, 0.2))


def failure(call: GatewayCall, stage: Stage, exc: Exception, payment: Payment,
            token: str | None = None) -> str:
    """Logs and counts ``exc``, met by pagos around ``payment``'s ``call`` at ``stage``; what
    the attempt log keeps of it: its type and text, with the card ``token`` (in the clear, if
    the call had it) replaced wherever it appears, then anything token-shaped, then cut. The
    log line has the same, and where it was raised (the traceback's frames, without the texts
    of the exceptions it chained, which nothing has masked)."""
    text = f"{type(exc).__name__}: {exc}"
    if token:
        text = text.replace(token, MASK)
    kept = scrub(text)[:_ERROR_CHARS]
    pagos_metrics.GATEWAY_WORKER_ERRORS.labels(SERVICE, call.value, stage.value).inc()
    log.error("gateway %s: pagos failed (%s): %s", call.value, stage.value, kept,
              extra={"saga_id": payment.saga_id, "call": call.value, "stage": stage.value,
                     "where": "".join(traceback.format_tb(exc.__traceback__))})
    return kept


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


async def record_or_unknown(units: PaymentUnits, called_for: Payment, decide: Decide,
                            unknown: Callable[[str], Decide], call: GatewayCall, *,
                            conclusive: bool) -> None:
    """Records the call's outcome (``decide``), trying once more on a new unit of work when
    that fails (the write is guarded by the status and counts it was decided on, so a commit
    that went through is not written twice). If it fails again:

    - an answer the gateway gave for sure (``conclusive``: approved, declined, refunded) is
      left unrecorded, the payment leased: when the lease runs out the call is made again under
      the same idempotency key and the gateway gives the same answer, recorded then. Recording
      it as unknown instead would spend an attempt on a guess, and on the last one end an
      approved charge in CHARGE_FAILED or a refund that was made in REFUND_FAILED, with a
      person sent to refund money already refunded;
    - an outcome that was unknown already is recorded as unknown (``unknown``, given what
      failed: decided with ``lease_held``), while the call still holds its lease.

    Each failure is logged and counted (``saga_gateway_worker_errors_total``, stage
    ``record``), so a database that keeps refusing the outcome is seen, not a silent loop."""
    detail = ""
    for again in (False, True):
        try:
            # Again: only while the call holds its lease, as the failed commit may have gone
            # through (it ends the lease).
            await record(units, called_for, decide, while_leased=again)
            return
        except Exception as exc:
            detail = failure(call, Stage.RECORD, exc, called_for)
    if conclusive:
        log.warning("gateway %s: its answer is not recorded; the call is made again, under the "
                    "same key, when its lease runs out", call.value,
                    extra={"saga_id": called_for.saga_id, "call": call.value})
        return
    await record(units, called_for, unknown(f"outcome not recorded: {detail}"),
                 while_leased=True)


async def record(units: PaymentUnits, called_for: Payment, decide: Decide, *,
                 while_leased: bool = False) -> None:
    """Writes a gateway call's outcome, decided by ``decide`` on the payment: first as it was
    ``called_for``, then, each time the payment had moved, as it is read now; ``while_leased``:
    only as long as the call holds its lease (``decide`` stages a ``lease_held`` outcome)."""
    current: Payment | None = called_for
    for _ in range(RECORD_TRIES):
        async with units(reads_outside_transaction=True) as (uow, payments):
            if current is None:
                current = await payments.read(called_for.saga_id)
                assert current is not None
                if while_leased and current.lease_until != called_for.lease_until:
                    # The outcome's commit went through after all (it ends the lease), or the
                    # lease ran out and another call holds the payment: that call records.
                    return
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
