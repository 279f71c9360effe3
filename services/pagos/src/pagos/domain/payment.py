"""The payment's state machine, free of infrastructure.

    (none) ──StockVerificado──▶ CHARGING ──approved──▶ CAPTURED ──FalloAsignacion / cancel──▶ REFUNDING
    CAPTURED ──StockAsignado──▶ CAPTURED, stock allocated: a FalloAsignacion is refused from then on
    (none) ──OrdenCancelada──▶ CANCELLED (a later StockVerificado never charges)
    CHARGING ──declined──▶ DECLINED
    CHARGING ──unavailable × N──▶ CHARGE_FAILED (dead letter + alert; outcome unknown)
    CHARGE_FAILED ──a late approval──▶ CAPTURED
    CHARGING / CHARGE_FAILED ──cancel, no charge call ever sent──▶ CANCELLED
    CHARGING / CHARGE_FAILED ──cancel once a call may have been sent──▶ CANCEL_REQUESTED
    CANCEL_REQUESTED ──replayed charge approved──▶ REFUNDING   (the charge happened: undo it)
    CANCEL_REQUESTED ──replayed charge declined──▶ CANCELLED + PagoRechazado (no other answer proves it)
    CANCEL_REQUESTED ──unresolved × N replays, or nothing to replay with──▶ REFUND_FAILED (manual)
    REFUNDING ──refunded──▶ REFUNDED ;  REFUNDING ──failed × N──▶ REFUND_FAILED (manual refund)

An outcome that is not known (a timeout, a lost reply, a worker that died mid-call) is never
assumed: it is resolved by replaying the charge under the same idempotency key, which answers
the first call's result if the gateway made that charge, and otherwise makes it now (then
refunded). A payment is "maybe charged" from the moment a worker leases it for a charge call
right before it sends the call (``charge_sent``) for ever after, whatever became of that worker
or its lease; a cancellation that lands before that mark drops the charge without a call.

The charge and its resolution have budgets of their own: a call counts against the one it was
sent for (``charge_attempts`` while CHARGING, ``resolve_attempts`` once CANCEL_REQUESTED), so
the calls a gateway outage took from the charge never shorten the resolution of its
cancellation: a cancelled charge is replayed ``resolve_attempts`` times before finance is asked
to refund by hand.

Every change is decided here from the current status and what happened; the repository applies
it conditionally, so a duplicate or late event changes nothing.

inventario answers each paid saga with exactly one of StockAsignado and FalloAsignacion, on
the saga's partition of inventory-events, so pagos hears them in the order they were written.
pagos records which it heard (``stock_allocated``, ``allocation_failed``) and holds inventario
to that contract, deciding always as pedidos does, so that the order and its money agree:

- StockAsignado, then FalloAsignacion: the goods are the customer's (pedidos completed the
  order and ignores the failure), so the charge stands; the refund is refused and counted.
- FalloAsignacion, then StockAsignado: the charge is already being undone (pedidos is waiting
  for the refund and cancels the order), so the undo goes on; the allocation is recorded and
  raises an alert, since goods are now held for a refunded order.
- OrdenCancelada after StockAsignado: pedidos cancels only an order it has not completed (a
  cancel request after COMPLETADA is refused with 409), and inventario puts the allocated stock
  back on the same event, so the charge is undone as for any cancellation.
- A compensation that names another order than the payment's changes nothing and is counted.

A StockAsignado is believed only for a payment whose charge was captured, the only one
inventario allocates for (after PagoExitoso): one for a payment still being charged, or never
charged, is not recorded, so it cannot keep a later genuine FalloAsignacion from refunding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    stock_allocated: bool = False
    """inventario's StockAsignado was recorded: the goods are the customer's."""
    allocation_failed: bool = False
    """inventario's FalloAsignacion was acted on: the charge was (or is being) undone."""
    resolve_attempts: int = 0
    """Replays of the charge sent to resolve its cancellation (CANCEL_REQUESTED); the charge
    calls made before it was cancelled are ``charge_attempts``."""
    trigger_record: tuple[str, int, int] | None = None
    """Where the StockVerificado that asked for the charge sat on Kafka (topic, partition,
    offset): a dead letter of the charge names it, and a replay re-reads it from there."""

    def names_another_order(self, order_id: str) -> bool:
        """An event about ``order_id`` is not about this payment's order (a payment recorded
        without an order, by a cancellation, is any order's)."""
        return self.order_id is not None and self.order_id.lower() != order_id.lower()


class Emit(StrEnum):
    PAGO_EXITOSO = "PagoExitoso"
    PAGO_RECHAZADO = "PagoRechazado"
    REEMBOLSO_EJECUTADO = "ReembolsoEjecutado"
    FALLO_REEMBOLSO = "FalloReembolso"


class Refusal(StrEnum):
    """Why a compensation was refused: it changes nothing, and is counted."""

    STOCK_ALLOCATED = "stock_allocated"  # FalloAsignacion for a saga whose stock was allocated
    ORDER_MISMATCH = "order_mismatch"    # it names another order than the payment's


@dataclass(frozen=True)
class Change:
    """What to do: the new status (None = unchanged), what to emit, whether to retry later."""

    status: PaymentStatus | None = None
    emit: Emit | None = None
    retry_in_s: float | None = None
    dead_letter: bool = False
    alert: str | None = None
    refused: Refusal | None = None
    allocation_failed: bool = False
    """Record that inventario's allocation failed (a StockAsignado after it is then known to
    contradict it)."""


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
    # Allocated stock or not: pedidos cancelled the order, and inventario releases its stock.
    return _undo_charge(status, charge_sent)


def on_allocation_failed(status: PaymentStatus | None, charge_sent: bool) -> Change:
    if status is None:
        return NOTHING  # an allocation follows a captured charge: nothing was ever asked
    return _undo_charge(status, charge_sent)


def on_compensation(payment: Payment | None, order_id: str, *,
                    allocation_failure: bool) -> Change:
    """A FalloAsignacion (``allocation_failure``) or an OrdenCancelada about ``order_id``, for
    ``payment``: refused when it is not the payment's to act on, else the charge undone."""
    status = payment.status if payment else None
    charge_sent = bool(payment and payment.charge_sent)
    if not allocation_failure:
        if payment is not None and payment.names_another_order(order_id):
            return Change(refused=Refusal.ORDER_MISMATCH)
        return on_order_cancelled(status, charge_sent)
    if payment is None:
        return on_allocation_failed(status, charge_sent)
    if payment.names_another_order(order_id):
        return Change(refused=Refusal.ORDER_MISMATCH)
    if payment.stock_allocated:
        return Change(refused=Refusal.STOCK_ALLOCATED)
    return replace(on_allocation_failed(status, charge_sent),
                   allocation_failed=not payment.allocation_failed)


# Statuses of a payment whose charge may have been captured, with its PagoExitoso, and may
# since have been undone: the only ones inventario may have allocated stock for. A payment
# still being charged may yet be captured: an allocation recorded on it would keep the genuine
# FalloAsignacion that follows from refunding.
CAPTURED_ONCE = (PaymentStatus.CAPTURED, PaymentStatus.REFUNDING, PaymentStatus.REFUNDED,
                 PaymentStatus.REFUND_FAILED)


class Allocation(StrEnum):
    """What a StockAsignado does to the payment."""

    RECORD = "record"                # the goods are the customer's: no refund from now on
    CONTRADICTS = "contradicts"      # recorded, after a FalloAsignacion that undid the charge
    DUPLICATE = "duplicate"          # recorded before
    NO_PAYMENT = "no_payment"        # an unknown saga: nothing to record it on
    NOT_CAPTURED = "not_captured"    # inventario allocates only after a captured charge
    ORDER_MISMATCH = "order_mismatch"

    @property
    def recorded(self) -> bool:
        return self in (Allocation.RECORD, Allocation.CONTRADICTS)


# The alert raised when inventario reports an allocation after its failure.
ALLOCATION_CONTRADICTED = "allocation_contradicted"


def on_stock_allocated(payment: Payment | None, order_id: str) -> Allocation:
    if payment is None:
        return Allocation.NO_PAYMENT
    if payment.names_another_order(order_id):
        return Allocation.ORDER_MISMATCH
    if payment.stock_allocated:
        return Allocation.DUPLICATE
    if payment.allocation_failed:
        # Out of contract, and which of the two is genuine cannot be told here: the undo that
        # started goes on, as pedidos goes on cancelling the order; a person settles the stock.
        return Allocation.CONTRADICTS
    if payment.status not in CAPTURED_ONCE:
        return Allocation.NOT_CAPTURED
    return Allocation.RECORD


# ------------------------------------------------------------------ gateway outcomes


class Outcome(StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    # Timeout, connection error, 5xx, a reply that cannot be understood, a call that failed
    # in pagos: the result is unknown.
    UNAVAILABLE = "unavailable"
    REJECTED = "rejected"        # 4xx other than a decline: retrying will not help
    NOT_ASKED = "not_asked"      # no token to call with, or none that opens: not asked


def after_charge(status: PaymentStatus, outcome: Outcome, charges_made: int,
                 replays_made: int, charge_schedule_s: tuple[float, ...],
                 resolve_attempts: int) -> Change:
    """``charges_made``: the charge calls made, and ``replays_made``: the replays sent to
    resolve a cancellation, each counting this call if it was one of theirs (a call counts
    against what it was sent for: a charge call answered once the payment is CANCEL_REQUESTED
    counts as a charge call, and leaves the resolution its every replay).
    ``charge_schedule_s`` are the waits between attempts."""
    if status is PaymentStatus.CHARGING:
        if outcome is Outcome.APPROVED:
            return Change(PaymentStatus.CAPTURED, Emit.PAGO_EXITOSO)
        if outcome is Outcome.DECLINED:
            return Change(PaymentStatus.DECLINED, Emit.PAGO_RECHAZADO)
        if outcome is Outcome.UNAVAILABLE and charges_made <= len(charge_schedule_s):
            return Change(retry_in_s=charge_schedule_s[charges_made - 1])
        return Change(PaymentStatus.CHARGE_FAILED, dead_letter=True, alert="charge_failed")
    if status is PaymentStatus.CANCEL_REQUESTED:
        if outcome is Outcome.APPROVED:
            return Change(PaymentStatus.REFUNDING, retry_in_s=0)
        if outcome is Outcome.DECLINED:
            # A replay of the first call's key is declined only if no charge was made under
            # it (a made charge is answered as made): nothing to undo. The card was declined
            # all the same: pedidos hears it, for its decline limits, though the order is over.
            return Change(PaymentStatus.CANCELLED, Emit.PAGO_RECHAZADO)
        # Any other refusal proves nothing about the first call (the key reused with other
        # parameters, a request still in progress, credentials): unknown, like a timeout.
        if outcome is not Outcome.NOT_ASKED and replays_made < resolve_attempts:
            # The first replay waits as a charge's first retry does (a charge call answered
            # after the cancellation counts no replay, and waits the same).
            step = min(max(replays_made, 1), len(charge_schedule_s))
            return Change(retry_in_s=charge_schedule_s[step - 1])
        return Change(PaymentStatus.REFUND_FAILED, Emit.FALLO_REEMBOLSO,
                      alert="cancelled_charge_unresolved")
    if status is PaymentStatus.CHARGE_FAILED and outcome is Outcome.APPROVED:
        # A call given up on answered after all (its lease had run out): the charge is known
        # to be made, and the order can go on (or be refunded, if it is cancelled meanwhile).
        return Change(PaymentStatus.CAPTURED, Emit.PAGO_EXITOSO)
    return NOTHING  # the status moved on while the call was in flight


def manual_refund_required(status: PaymentStatus | None) -> bool:
    """A payment left for finance to refund by hand (docs/standard.md#pagos-charge-and-refund): the
    refund kept failing, or whether the charge happened could not be found out."""
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



def needs_a_person(status: PaymentStatus | None, manual_refund_required: bool) -> bool:
    """A payment marked for finance to settle by hand, until an operator records that it was
    (``pagos.usecases.resolve_payment``)."""
    return manual_refund_required or status is PaymentStatus.REFUND_FAILED
