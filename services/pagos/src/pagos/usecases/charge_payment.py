"""A leased payment's charge call, and its outcome recorded: a first charge, its retries, or
the replay that resolves a charge cancelled while its outcome was unknown.

The call is re-checked right before it leaves (``PaymentWork.mark_charge_sent``): a
cancellation that landed after the lease drops it unsent. Every call of a payment carries the
same idempotency key, derived from the saga id, so a call made again (a retry, a resolution, a
worker that died mid-call) answers what the first one did at the gateway.

The payment keeps its token sealed, as pedidos sealed it; it is opened right before the call and
held in memory for that call only, and only for the charge the payment is: its saga, order,
customer, currency and amount in minor units, as the StockVerificado that asked for it named
them (``saga_contracts.sealing.Binding``). A token that does not open fails the charge without
a call, as a payment without a token does: CHARGE_FAILED and a dead letter. Sealed with a key
pagos does not hold, an operator replays it once pagos holds the key (docs/operations.md).
Not sealed for this charge (a token copied from another saga's event into a forged one, or an
event whose amount, currency or customer is not the order's) no key and no replay opens it:
it is counted in ``saga_sealed_token_mismatch_total`` and the payment loses its customer, which
was only the event's word, so that a forged event leaves no payment any customer sees.

The amount goes to the gateway in the minor units of its currency (ISO 4217: 1000 CLP is 1000,
10.00 USD is 1000). One its currency cannot hold (inventario and pedidos refuse such amounts
before a payment exists) is not sent either, and fails the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pagos import metrics as pagos_metrics
from pagos.config import PagosSettings
from pagos.domain import payment as domain
from pagos.domain.payment import Payment
from pagos.metrics import GatewayCall, Stage
from pagos.usecases import call_outcome, charge_request, payment_events
from pagos.usecases.ports import PaymentGateway, PaymentTokenOpener, PaymentUnits, PaymentWork
from saga_contracts import minor_units
from saga_contracts.sealing import Binding, CannotOpen, SealingError
from sagakit.envelope import utc_now_iso
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("pagos.gateway_worker")


def charge_key(saga_id: str) -> str:
    return f"charge-{saga_id}"


@dataclass(frozen=True)
class _Opened:
    token: str | None
    """In the clear; None when the gateway cannot be asked."""
    why_not: str = ""
    not_for_this_charge: bool = False


def _charge_of(payment: Payment, amount_minor: int) -> Binding:
    """The charge ``payment`` is, as its token must have been sealed for. A payment without an
    order or a customer (an event that named none) binds an empty one, which pedidos never
    seals for: its token does not open."""
    assert payment.currency is not None
    return Binding(saga_id=payment.saga_id, order_id=payment.order_id or "",
                   customer_id=payment.customer_id or "", currency=payment.currency,
                   amount_minor=amount_minor)


def _opened(tokens: PaymentTokenOpener, payment: Payment, amount_minor: int) -> _Opened:
    """``payment``'s token in the clear, or why the gateway cannot be asked."""
    if payment.token is None:
        return _Opened(None, "no payment token")
    try:
        return _Opened(tokens.open(payment.token, _charge_of(payment, amount_minor)))
    except CannotOpen as exc:
        # No key and no retry opens it: a copy of another charge's token (a forged event), or
        # an event whose amount, currency or customer is not what the order was placed for.
        # Its text names the key id, never the token.
        pagos_metrics.SEALED_TOKEN_MISMATCHES.labels(call_outcome.SERVICE).inc()
        log.error("payment token is not for this charge: %s", exc,
                  extra={"saga_id": payment.saga_id, "status": "FAILED"})
        return _Opened(None, f"payment token is not for this charge: {exc}",
                       not_for_this_charge=True)
    except SealingError as exc:
        # Final for this token: no retry opens it. Its text names the key id, never the token.
        log.error("payment token does not open: %s", exc,
                  extra={"saga_id": payment.saga_id, "status": "FAILED"})
        return _Opened(None, f"payment token does not open: {exc}")


def _minor_units(payment: Payment) -> tuple[int | None, str]:
    """``payment``'s amount in its currency's minor units, or None and why it has none."""
    assert payment.amount is not None and payment.currency is not None
    try:
        return minor_units.to_minor_units(payment.amount, payment.currency), ""
    except (minor_units.TooManyDecimals, minor_units.UnknownCurrency) as exc:
        log.error("payment amount cannot be charged: %s", exc,
                  extra={"saga_id": payment.saga_id, "status": "FAILED"})
        return None, f"amount cannot be charged: {exc}"


@dataclass(frozen=True)
class _Call:
    """A charge call, made or not, as its outcome is recorded."""

    sent_for: Payment
    """The payment as the call found it right before it left (``_mark_sent``), or as it was
    leased when no call left: sent while CANCEL_REQUESTED, the call is a replay that resolves
    a cancellation, and counts against that budget."""
    outcome: domain.Outcome
    charge_id: str | None = None
    decline: str | None = None
    detail: str = ""
    disowned: bool = False

    @property
    def replay(self) -> bool:
        return self.sent_for.status is domain.PaymentStatus.CANCEL_REQUESTED

    def unknown(self, detail: str) -> _Call:
        return _Call(self.sent_for, domain.Outcome.UNAVAILABLE, detail=detail,
                     disowned=self.disowned)


async def charge_payment(units: PaymentUnits, gateway: PaymentGateway, settings: PagosSettings,
                         payment: Payment, kick: Callable[[], None], *,
                         tokens: PaymentTokenOpener) -> None:
    """Makes ``payment``'s charge call (it is leased to this call) with its token opened by
    ``tokens``, and records its outcome; ``kick`` wakes the worker when the outcome schedules
    more work."""
    try:
        call = await _call(units, gateway, payment, tokens)
    except Exception as exc:
        # pagos failed before any call left (opening the token, the re-check before the
        # call): as unknown as a gateway that does not answer, and counted as such.
        call = _Call(payment, domain.Outcome.UNAVAILABLE, detail=call_outcome.failure(
            GatewayCall.CHARGE, Stage.CALL, exc, payment))
    if call is None:
        log.info("charge not sent: the payment has no charge work left, or the lease "
                 "ran out", extra={"saga_id": payment.saga_id})
        return
    at = utc_now_iso()
    await call_outcome.record_or_unknown(
        units, call.sent_for, _decide(call, at, settings, kick),
        lambda detail: _decide(call.unknown(detail), at, settings, kick, lease_held=True),
        GatewayCall.CHARGE,
        conclusive=call.outcome in (domain.Outcome.APPROVED, domain.Outcome.DECLINED))


async def _call(units: PaymentUnits, gateway: PaymentGateway, payment: Payment,
                tokens: PaymentTokenOpener) -> _Call | None:
    """``payment``'s charge call and what it answered; None when it must not be sent."""
    assert payment.amount is not None and payment.currency is not None
    amount_minor, unchargeable = _minor_units(payment)
    opened = (_opened(tokens, payment, amount_minor) if amount_minor is not None
              else _Opened(None, unchargeable))
    token = opened.token
    if token is None or amount_minor is None:
        # Nothing to call (or replay) the charge with: the gateway is not asked, and an
        # outcome that was unknown stays unknown (domain.after_charge: manual refund).
        return _Call(payment, domain.Outcome.NOT_ASKED, detail=opened.why_not,
                     disowned=opened.not_for_this_charge)
    marked = await _mark_sent(units, payment)
    if marked is None:
        return None
    # A cancellation may have turned the charge into a resolution: ``marked`` says which.
    try:
        result = await gateway.charge(
            amount_minor=amount_minor, currency=payment.currency.lower(), token=token,
            idempotency_key=charge_key(payment.saga_id), saga_id=payment.saga_id)
    except Exception as exc:
        # The call may have reached the gateway: unknown, made again under the same key.
        return _Call(marked, domain.Outcome.UNAVAILABLE, detail=call_outcome.failure(
            GatewayCall.CHARGE, Stage.CALL, exc, marked, token))
    return _Call(marked, result.outcome, result.charge_id, result.decline_code, result.detail,
                 opened.not_for_this_charge)


def _decide(call: _Call, at: str, settings: PagosSettings, kick: Callable[[], None], *,
            lease_held: bool = False) -> call_outcome.Decide:
    """How ``call``'s outcome is decided and staged on the payment as it is given."""

    def decide(uow: UnitOfWorkPort, payments: PaymentWork, current: Payment) -> None:
        # Each call counts against what it was sent for: the charge's retries, or the replays
        # that resolve its cancellation (a charge call answered after the cancellation is
        # still a charge call, and leaves the resolution its every replay).
        charges_made = current.charge_attempts + (0 if call.replay else 1)
        replays_made = current.resolve_attempts + (1 if call.replay else 0)
        attempts_made = replays_made if call.replay else charges_made
        attempt = {"kind": "resolve" if call.replay else "charge", "attempt": attempts_made,
                   "at": at, "outcome": call.outcome.value, "detail": call.detail}
        change = domain.after_charge(current.status, call.outcome, charges_made, replays_made,
                                     settings.charge_retry_schedule_s,
                                     settings.resolve_attempts)
        payments.record_outcome(current, call_outcome.outcome_of(
            change, attempt=attempt, lease_until=call.sent_for.lease_until,
            lease_held=lease_held, charge_attempts=charges_made,
            resolve_attempts=replays_made, charge_id=call.charge_id or None,
            decline_code=call.decline or None, disowned=call.disowned))
        if change.emit is domain.Emit.PAGO_EXITOSO:
            uow.emit(payment_events.pago_exitoso(current, call.charge_id),
                     saga_id=current.saga_id, parent_span_id=current.trigger_span_id)
        elif change.emit is domain.Emit.PAGO_RECHAZADO:
            uow.emit(payment_events.pago_rechazado(current, call.decline or "rejected",
                                                   call.detail or "declined"),
                     saga_id=current.saga_id, parent_span_id=current.trigger_span_id)
        elif change.emit is domain.Emit.FALLO_REEMBOLSO:
            call_outcome.emit_refund_failed(uow, current, attempts_made, call.detail)
        if change.dead_letter:
            # The charge could not be made after every retry: park it for an operator, with
            # the StockVerificado that asked for it (``sagactl replay`` asks for it again).
            payments.dead_letter(charge_request.dead_letter(current, attempts_made,
                                                            call.detail))
        call_outcome.after(uow, change, current, kick)

    return decide


async def _mark_sent(units: PaymentUnits, payment: Payment) -> Payment | None:
    """Re-checks the payment right before its charge call leaves, and marks it as maybe charged
    from then on: a cancellation that landed after the lease but before this drops the charge
    and no call is sent."""
    async with units(reads_outside_transaction=True) as (_, payments):
        return await payments.mark_charge_sent(payment)
