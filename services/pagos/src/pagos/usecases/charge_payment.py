"""A leased payment's charge call, and its outcome recorded: a first charge, its retries, or
the replay that resolves a charge cancelled while its outcome was unknown.

The call is re-checked right before it leaves (``PaymentWork.mark_charge_sent``): a
cancellation that landed after the lease drops it unsent. Every call of a payment carries the
same idempotency key, derived from the saga id, so a call made again (a retry, a resolution, a
worker that died mid-call) answers what the first one did at the gateway.

The payment keeps its token sealed, as pedidos sealed it; it is opened right before the call and
held in memory for that call only. A token that does not open (sealed with a key pagos does not
hold, changed, or another order's) fails the charge without a call, as a payment without a
token does: CHARGE_FAILED and a dead letter, which an operator replays once pagos holds the key
(docs/operations.md).

The amount goes to the gateway in the minor units of its currency (ISO 4217: 1000 CLP is 1000,
10.00 USD is 1000). One its currency cannot hold (inventario and pedidos refuse such amounts
before a payment exists) is not sent either, and fails the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pagos.config import PagosSettings
from pagos.domain import payment as domain
from pagos.domain.payment import Payment
from pagos.usecases import call_outcome, charge_request, payment_events
from pagos.usecases.ports import PaymentGateway, PaymentTokenOpener, PaymentUnits, PaymentWork
from saga_contracts import minor_units
from saga_contracts.sealing import SealingError
from sagakit.envelope import utc_now_iso
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("pagos.gateway_worker")


def charge_key(saga_id: str) -> str:
    return f"charge-{saga_id}"


def _opened(tokens: PaymentTokenOpener, payment: Payment) -> tuple[str | None, str]:
    """``payment``'s token in the clear, or None and why the gateway cannot be asked."""
    if payment.token is None:
        return None, "no payment token"
    try:
        return tokens.open(payment.token, payment.order_id or ""), ""
    except SealingError as exc:
        # Final for this token: no retry opens it. Its text names the key id, never the token.
        log.error("payment token does not open: %s", exc,
                  extra={"saga_id": payment.saga_id, "status": "FAILED"})
        return None, f"payment token does not open: {exc}"


def _minor_units(payment: Payment) -> tuple[int | None, str]:
    """``payment``'s amount in its currency's minor units, or None and why it has none."""
    assert payment.amount is not None and payment.currency is not None
    try:
        return minor_units.to_minor_units(payment.amount, payment.currency), ""
    except (minor_units.TooManyDecimals, minor_units.UnknownCurrency) as exc:
        log.error("payment amount cannot be charged: %s", exc,
                  extra={"saga_id": payment.saga_id, "status": "FAILED"})
        return None, f"amount cannot be charged: {exc}"


async def charge_payment(units: PaymentUnits, gateway: PaymentGateway, settings: PagosSettings,
                         payment: Payment, kick: Callable[[], None], *,
                         tokens: PaymentTokenOpener) -> None:
    """Makes ``payment``'s charge call (it is leased to this call) with its token opened by
    ``tokens``, and records its outcome; ``kick`` wakes the worker when the outcome schedules
    more work."""
    assert payment.amount is not None and payment.currency is not None
    amount_minor, unchargeable = _minor_units(payment)
    token, unopened = _opened(tokens, payment) if amount_minor is not None else (None,
                                                                                 unchargeable)
    if token is None or amount_minor is None:
        # Nothing to call (or replay) the charge with: the gateway is not asked, and an
        # outcome that was unknown stays unknown (domain.after_charge: manual refund).
        result_outcome, charge_id, decline, detail = domain.Outcome.NOT_ASKED, None, None, \
            unopened
    else:
        marked = await _mark_sent(units, payment)
        if marked is None:
            log.info("charge not sent: the payment has no charge work left, or the lease "
                     "ran out", extra={"saga_id": payment.saga_id})
            return
        result = await gateway.charge(
            amount_minor=amount_minor,
            currency=payment.currency.lower(), token=token,
            idempotency_key=charge_key(payment.saga_id), saga_id=payment.saga_id)
        payment = marked  # a cancellation may have turned it into a resolution
        result_outcome, charge_id, decline, detail = (result.outcome, result.charge_id,
                                                     result.decline_code, result.detail)
    at = utc_now_iso()

    def decide(uow: UnitOfWorkPort, payments: PaymentWork, current: Payment) -> None:
        attempts_made = current.charge_attempts + 1
        attempt = {"kind": "charge", "attempt": attempts_made, "at": at,
                   "outcome": result_outcome.value, "detail": detail}
        change = domain.after_charge(current.status, result_outcome, attempts_made,
                                     settings.charge_retry_schedule_s,
                                     settings.resolve_attempts)
        payments.record_outcome(current, call_outcome.outcome_of(
            change, attempt=attempt, lease_until=payment.lease_until,
            charge_attempts=attempts_made, charge_id=charge_id or None,
            decline_code=decline or None))
        if change.emit is domain.Emit.PAGO_EXITOSO:
            uow.emit(payment_events.pago_exitoso(current, charge_id), saga_id=payment.saga_id,
                     parent_span_id=current.trigger_span_id)
        elif change.emit is domain.Emit.PAGO_RECHAZADO:
            uow.emit(payment_events.pago_rechazado(current, decline or "rejected",
                                                   detail or "declined"),
                     saga_id=payment.saga_id, parent_span_id=current.trigger_span_id)
        elif change.emit is domain.Emit.FALLO_REEMBOLSO:
            call_outcome.emit_refund_failed(uow, current, attempts_made, detail)
        if change.dead_letter:
            # The charge could not be made after every retry: park it for an operator, with
            # the StockVerificado that asked for it (``sagactl replay`` asks for it again).
            payments.dead_letter(charge_request.dead_letter(current, attempts_made, detail))
        call_outcome.after(uow, change, current, kick)

    await call_outcome.record(units, payment, decide)


async def _mark_sent(units: PaymentUnits, payment: Payment) -> Payment | None:
    """Re-checks the payment right before its charge call leaves, and marks it as maybe charged
    from then on: a cancellation that landed after the lease but before this drops the charge
    and no call is sent."""
    async with units(reads_outside_transaction=True) as (_, payments):
        return await payments.mark_charge_sent(payment)
