"""A leased payment's refund call, and its outcome recorded: refunded, retried on its
schedule, or given up on and left for a refund by hand (FalloReembolso)."""

from __future__ import annotations

from collections.abc import Callable

from pagos.config import PagosSettings
from pagos.domain import payment as domain
from pagos.domain.payment import Payment
from pagos.metrics import COMPENSATION_REASON, GatewayCall, Stage
from pagos.usecases import call_outcome, payment_events
from pagos.usecases.ports import PaymentGateway, PaymentUnits, PaymentWork
from saga_contracts import minor_units
from sagakit.envelope import utc_now_iso
from sagakit.observability import metrics
from sagakit.ports import UnitOfWorkPort

SERVICE = "pagos"


def refund_key(saga_id: str) -> str:
    return f"refund-{saga_id}"


async def refund_payment(units: PaymentUnits, gateway: PaymentGateway, settings: PagosSettings,
                         payment: Payment, kick: Callable[[], None]) -> None:
    """Makes ``payment``'s refund call (it is leased to this call) and records its outcome;
    ``kick`` wakes the worker when the outcome schedules a retry."""
    try:
        succeeded, refund_id, detail = await _call(gateway, payment)
    except Exception as exc:
        # The refund may have reached the gateway: failed, tried again under the same key
        # (which answers a refund made as made), on the refund's schedule.
        succeeded, refund_id, detail = False, None, call_outcome.failure(
            GatewayCall.REFUND, Stage.CALL, exc, payment)
    at = utc_now_iso()
    await call_outcome.record_or_unknown(
        units, payment, _decide(payment, succeeded, refund_id, detail, at, settings, kick),
        lambda failed: _decide(payment, False, None, failed, at, settings, kick,
                               lease_held=True),
        GatewayCall.REFUND, conclusive=succeeded)


async def _call(gateway: PaymentGateway, payment: Payment) -> tuple[bool, str | None, str]:
    """Whether the refund was made, its id, and what the gateway said."""
    # A payment that was charged holds an amount its currency can hold (charge_payment).
    assert payment.amount is not None and payment.currency is not None
    if payment.charge_id is None:
        return False, None, "no charge id to refund"
    result = await gateway.refund(charge_id=payment.charge_id,
                                  amount_minor=minor_units.to_minor_units(
                                      payment.amount, payment.currency),
                                  idempotency_key=refund_key(payment.saga_id))
    return result.succeeded, result.refund_id, result.detail


def _decide(called_for: Payment, succeeded: bool, refund_id: str | None, detail: str, at: str,
            settings: PagosSettings, kick: Callable[[], None], *,
            lease_held: bool = False) -> call_outcome.Decide:
    """How the refund call's outcome is decided and staged on the payment as it is given."""

    def decide(uow: UnitOfWorkPort, payments: PaymentWork, current: Payment) -> None:
        attempts_made = current.refund_attempts + 1
        attempt = {"kind": "refund", "attempt": attempts_made, "at": at,
                   "outcome": "refunded" if succeeded else "failed", "detail": detail}
        change = domain.after_refund(current.status, succeeded, attempts_made,
                                     settings.refund_retry_schedule_s)
        refunded = change.status is domain.PaymentStatus.REFUNDED
        payments.record_outcome(current, call_outcome.outcome_of(
            change, attempt=attempt, lease_until=called_for.lease_until,
            lease_held=lease_held, refund_attempts=attempts_made, refunded=refunded,
            refund_id=refund_id if refunded else None,
            amount_refunded=current.amount if refunded else None))
        if change.emit is domain.Emit.REEMBOLSO_EJECUTADO:
            uow.emit(payment_events.reembolso_ejecutado(current, refund_id),
                     saga_id=current.saga_id)
            uow.after_commit(lambda: metrics.COMPENSATIONS.labels(SERVICE, COMPENSATION_REASON).inc())
        elif change.emit is domain.Emit.FALLO_REEMBOLSO:
            call_outcome.emit_refund_failed(uow, current, attempts_made, detail)
        call_outcome.after(uow, change, current, kick)

    return decide
