"""The payment's state machine, free of infrastructure.

    (none) ──StockVerificado──▶ CHARGING ──approved──▶ CAPTURED ──FalloAsignacion / cancel──▶ REFUNDING
    (none) ──OrdenCancelada──▶ CANCELLED (a later StockVerificado never charges)
    CHARGING ──declined──▶ DECLINED
    CHARGING ──unavailable × N──▶ CHARGE_FAILED (dead letter + alert; outcome unknown)
    CHARGING ──cancel while a call may be in flight──▶ CANCEL_REQUESTED
    CANCEL_REQUESTED ──approved──▶ REFUNDING      (the charge happened: undo it)
    CANCEL_REQUESTED ──declined──▶ CANCELLED
    REFUNDING ──refunded──▶ REFUNDED ;  REFUNDING ──failed × N──▶ REFUND_FAILED (manual refund)

Every change is decided here from the current status and what happened; the repository applies
it conditionally, so a duplicate or late event changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum


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


def on_order_cancelled(status: PaymentStatus | None, charge_attempted: bool) -> Change:
    if status is None:
        return Change(PaymentStatus.CANCELLED)
    if status is PaymentStatus.CHARGING:
        # Never called the gateway: nothing to undo. Otherwise a call may be in flight or
        # may have gone through: resolve it before deciding.
        return Change(PaymentStatus.CANCEL_REQUESTED if charge_attempted
                      else PaymentStatus.CANCELLED, retry_in_s=0 if charge_attempted else None)
    if status is PaymentStatus.CHARGE_FAILED:
        return Change(PaymentStatus.CANCEL_REQUESTED, retry_in_s=0)
    if status is PaymentStatus.CAPTURED:
        return Change(PaymentStatus.REFUNDING, retry_in_s=0)
    return NOTHING


def on_allocation_failed(status: PaymentStatus | None) -> Change:
    if status is PaymentStatus.CAPTURED:
        return Change(PaymentStatus.REFUNDING, retry_in_s=0)
    if status is PaymentStatus.CHARGING:
        return Change(PaymentStatus.CANCEL_REQUESTED, retry_in_s=0)
    return NOTHING


# ------------------------------------------------------------------ gateway outcomes


class Outcome(StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    UNAVAILABLE = "unavailable"  # timeout, connection error, 5xx: the result is unknown
    REJECTED = "rejected"        # 4xx other than a decline: retrying will not help


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
        if outcome in (Outcome.DECLINED, Outcome.REJECTED):
            return Change(PaymentStatus.CANCELLED)
        if attempts_made < resolve_attempts:
            return Change(retry_in_s=charge_schedule_s[min(attempts_made, len(charge_schedule_s))
                                                       - 1])
        return Change(PaymentStatus.REFUND_FAILED, Emit.FALLO_REEMBOLSO,
                      alert="cancelled_charge_unresolved")
    return NOTHING  # the status moved on while the call was in flight


def after_refund(status: PaymentStatus, succeeded: bool, refund_attempts_made: int,
                 refund_schedule_s: tuple[float, ...]) -> Change:
    if status is not PaymentStatus.REFUNDING:
        return NOTHING
    if succeeded:
        return Change(PaymentStatus.REFUNDED, Emit.REEMBOLSO_EJECUTADO)
    if refund_attempts_made < len(refund_schedule_s) + 1:
        return Change(retry_in_s=refund_schedule_s[refund_attempts_made - 1])
    return Change(PaymentStatus.REFUND_FAILED, Emit.FALLO_REEMBOLSO, alert="refund_failed")


# ------------------------------------------------------------------ money


def to_minor_units(amount: Decimal) -> int:
    """Two-decimal currencies only: 12.34 → 1234. Never through float."""
    return int((amount * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def from_minor_units(minor: int) -> Decimal:
    return (Decimal(minor) / 100).quantize(Decimal("0.01"))
