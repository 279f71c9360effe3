"""The payment's state machine, free of infrastructure.

    (none) ──StockVerificado──▶ CHARGING ──approved──▶ CAPTURED ──FalloAsignacion / cancel──▶ REFUNDING
    (none) ──OrdenCancelada──▶ CANCELLED (a later StockVerificado never charges)
    CHARGING ──declined──▶ DECLINED
    CHARGING ──unavailable × N──▶ CHARGE_FAILED (dead letter + alert; outcome unknown)
    CHARGE_FAILED ──a late approval──▶ CAPTURED
    CHARGING / CHARGE_FAILED ──cancel, no charge call ever sent──▶ CANCELLED
    CHARGING / CHARGE_FAILED ──cancel once a call may have been sent──▶ CANCEL_REQUESTED
    CANCEL_REQUESTED ──replayed charge approved──▶ REFUNDING   (the charge happened: undo it)
    CANCEL_REQUESTED ──replayed charge declined──▶ CANCELLED (any other answer is not a proof)
    CANCEL_REQUESTED ──unresolved × N, or nothing to replay with──▶ REFUND_FAILED (manual)
    REFUNDING ──refunded──▶ REFUNDED ;  REFUNDING ──failed × N──▶ REFUND_FAILED (manual refund)

An outcome that is not known (a timeout, a lost reply, a worker that died mid-call) is never
assumed: it is resolved by replaying the charge under the same idempotency key, which answers
the first call's result if the gateway made that charge, and otherwise makes it now (then
refunded). A payment is "maybe charged" from the moment a worker leases it for a charge call
right before it sends the call (``charge_sent``) for ever after, whatever became of that worker
or its lease; a cancellation that lands before that mark drops the charge without a call.

Every change is decided here from the current status and what happened; the repository applies
it conditionally, so a duplicate or late event changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any


class PaymentStatus(StrEnum):
    CHARGING = "CHARGING"
    CAPTURED = "CAPTURED"
    DECLINED = "DECLINED"
    CHARGE_FAILED = "CHARGE_FAILED"
    CANCELLED = "CANCELLED"
    CANCEL_REQUESTED = "CANCEL_REQUESTED"
    REFUNDING = "REFUNDING"
    REFUNDED = "REFUNDED"
    REFUND_FAILED = "REFUND_FAILED"


# Statuses in which the gateway worker has something to do.
CHARGE_WORK = (PaymentStatus.CHARGING, PaymentStatus.CANCEL_REQUESTED)
REFUND_WORK = (PaymentStatus.REFUNDING,)
# Statuses in which the charge may still have to be made or replayed: the payment token is kept
# in them and cleared once the charge's outcome is known (an outcome that is not known yet is
# resolved by replaying the charge under its idempotency key, which needs the token).
TOKEN_NEEDED = (PaymentStatus.CHARGING, PaymentStatus.CANCEL_REQUESTED,
                PaymentStatus.CHARGE_FAILED)


@dataclass(frozen=True)
class Payment:
    """A saga's payment as it was read: what the decisions below are taken on."""

    payment_id: str
    saga_id: str
    order_id: str | None
    status: PaymentStatus
    amount: Decimal | None
    currency: str | None
    token: str | None
    """The payment token as pedidos sealed it: opened only for a charge call, in memory."""
    charge_id: str | None
    charge_attempts: int
    refund_attempts: int
    leased: bool
    charge_sent: bool = False
    """Leased for a charge call at least once: the charge may have happened."""
    lease_until: datetime | None = None
    trigger_span_id: str | None = None
    trigger_traceparent: str | None = None
    trigger_event: dict[str, Any] | None = None
    """The StockVerificado that asked for the charge, without its payment token (the token is
    the payment's own column): what a dead letter of the charge parks."""
    attempt_log: tuple[dict[str, Any], ...] = ()
    customer_id: str | None = None
    """Whose payment it is, as the StockVerificado that asked for it named the customer
    (``pagos.usecases.customer``); bound into the sealed token, so a charge is only made for
    the customer the order was placed by."""


class Emit(StrEnum):
    PAGO_EXITOSO = "PagoExitoso"
    PAGO_RECHAZADO = "PagoRechazado"
    REEMBOLSO_EJECUTADO = "ReembolsoEjecutado"
    FALLO_REEMBOLSO = "FalloReembolso"


@dataclass(frozen=True)
class Change:
    """What to do: the new status (None = unchanged), what to emit, whether to retry later."""

    status: PaymentStatus | None = None
    emit: Emit | None = None
    retry_in_s: float | None = None
    dead_letter: bool = False
    alert: str | None = None


NOTHING = Change()


# ------------------------------------------------------------------ events


def _undo_charge(status: PaymentStatus | None, charge_sent: bool) -> Change:
    """The charge must not stand: drop it, resolve it, or refund it."""
    if status in (PaymentStatus.CHARGING, PaymentStatus.CHARGE_FAILED) and not charge_sent:
        # No worker ever leased it for a call, and none will now (a lease is only taken on a
        # payment still CHARGING, under the row lock this decision holds): nothing to undo. A
        # charge that failed without a call (its token could not be opened) is such a payment.
        return Change(PaymentStatus.CANCELLED)
    if status in (PaymentStatus.CHARGING, PaymentStatus.CHARGE_FAILED):
        # A call may be in flight or may have gone through: resolve it before deciding.
        return Change(PaymentStatus.CANCEL_REQUESTED, retry_in_s=0)
    if status is PaymentStatus.CAPTURED:
        return Change(PaymentStatus.REFUNDING, retry_in_s=0)
    return NOTHING


def on_order_cancelled(status: PaymentStatus | None, charge_sent: bool) -> Change:
    if status is None:
        return Change(PaymentStatus.CANCELLED)  # a later StockVerificado never charges
    return _undo_charge(status, charge_sent)


def on_allocation_failed(status: PaymentStatus | None, charge_sent: bool) -> Change:
    if status is None:
        return NOTHING  # an allocation follows a captured charge: nothing was ever asked
    return _undo_charge(status, charge_sent)


# ------------------------------------------------------------------ gateway outcomes


class Outcome(StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    UNAVAILABLE = "unavailable"  # timeout, connection error, 5xx: the result is unknown
    REJECTED = "rejected"        # 4xx other than a decline: retrying will not help
    NOT_ASKED = "not_asked"      # no token to call with, or none that opens: not asked


def after_charge(status: PaymentStatus, outcome: Outcome, attempts_made: int,
                 charge_schedule_s: tuple[float, ...], resolve_attempts: int) -> Change:
    """``attempts_made`` counts this one; ``charge_schedule_s`` are the waits between attempts."""
    if status is PaymentStatus.CHARGING:
        if outcome is Outcome.APPROVED:
            return Change(PaymentStatus.CAPTURED, Emit.PAGO_EXITOSO)
        if outcome is Outcome.DECLINED:
            return Change(PaymentStatus.DECLINED, Emit.PAGO_RECHAZADO)
        if outcome is Outcome.UNAVAILABLE and attempts_made <= len(charge_schedule_s):
            return Change(retry_in_s=charge_schedule_s[attempts_made - 1])
        return Change(PaymentStatus.CHARGE_FAILED, dead_letter=True, alert="charge_failed")
    if status is PaymentStatus.CANCEL_REQUESTED:
        if outcome is Outcome.APPROVED:
            return Change(PaymentStatus.REFUNDING, retry_in_s=0)
        if outcome is Outcome.DECLINED:
            # A replay of the first call's key is declined only if no charge was made under
            # it (a made charge is answered as made): nothing to undo.
            return Change(PaymentStatus.CANCELLED)
        # Any other refusal proves nothing about the first call (the key reused with other
        # parameters, a request still in progress, credentials): unknown, like a timeout.
        if outcome is not Outcome.NOT_ASKED and attempts_made < resolve_attempts:
            return Change(retry_in_s=charge_schedule_s[min(attempts_made, len(charge_schedule_s))
                                                       - 1])
        return Change(PaymentStatus.REFUND_FAILED, Emit.FALLO_REEMBOLSO,
                      alert="cancelled_charge_unresolved")
    if status is PaymentStatus.CHARGE_FAILED and outcome is Outcome.APPROVED:
        # A call given up on answered after all (its lease had run out): the charge is known
        # to be made, and the order can go on (or be refunded, if it is cancelled meanwhile).
        return Change(PaymentStatus.CAPTURED, Emit.PAGO_EXITOSO)
    return NOTHING  # the status moved on while the call was in flight


def manual_refund_required(status: PaymentStatus | None) -> bool:
    """A payment left for finance to refund by hand (Part II §3.3, "marcar para reembolso
    manual"): the refund kept failing, or whether the charge happened could not be found out."""
    return status is PaymentStatus.REFUND_FAILED


def after_refund(status: PaymentStatus, succeeded: bool, refund_attempts_made: int,
                 refund_schedule_s: tuple[float, ...]) -> Change:
    if status is not PaymentStatus.REFUNDING:
        return NOTHING
    if succeeded:
        return Change(PaymentStatus.REFUNDED, Emit.REEMBOLSO_EJECUTADO)
    if refund_attempts_made < len(refund_schedule_s) + 1:
        return Change(retry_in_s=refund_schedule_s[refund_attempts_made - 1])
    return Change(PaymentStatus.REFUND_FAILED, Emit.FALLO_REEMBOLSO, alert="refund_failed")

