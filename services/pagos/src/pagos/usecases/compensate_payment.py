"""FalloAsignacion or OrdenCancelada → refund the charge, resolve it, or make sure it never
happens; unless the event is not the payment's to act on (pagos.domain.payment): one that names
another order, or a FalloAsignacion for a saga whose stock inventario allocated, changes nothing
and is counted in ``saga_refund_refused_total``, which pages (``RefundRefused``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeAlias

from pagos import metrics
from pagos.domain import payment as domain
from pagos.domain.payment import Payment
from pagos.usecases.customer import customer_of
from pagos.usecases.ports import PaymentStore
from saga_contracts.events.inventory import FalloAsignacion
from saga_contracts.events.orders import OrdenCancelada
from sagakit.errors import TransientError
from sagakit.message import Message
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("pagos.compensate")
SERVICE = "pagos"

Decide = Callable[[Payment | None], domain.Change]
Compensated: TypeAlias = Message[FalloAsignacion | OrdenCancelada]


async def compensate_allocation_failure(uow: UnitOfWorkPort, payments: PaymentStore,
                                        kick: Callable[[], None],
                                        event: Message[FalloAsignacion]) -> None:
    await _locked(uow, payments, kick, event, lambda p: domain.on_compensation(
        p, event.payload.order_id, allocation_failure=True))


async def compensate_order_cancellation(uow: UnitOfWorkPort, payments: PaymentStore,
                                        kick: Callable[[], None],
                                        event: Message[OrdenCancelada]) -> None:
    await _locked(uow, payments, kick, event, lambda p: domain.on_compensation(
        p, event.payload.order_id, allocation_failure=False))


async def _locked(uow: UnitOfWorkPort, payments: PaymentStore, kick: Callable[[], None],
                  event: Compensated, decide: Decide) -> None:
    """Decides on the payment under its row lock and applies the change in the same
    transaction. StockVerificado arrives on another topic, in another lane: its charge can be
    created between this handler finding no payment and recording one. Then the saga's unique
    key refuses this handler's row, and the charge that won is locked and decided on like any
    other (the INSERT waited for it to commit, and READ COMMITTED lets the next statement see
    it) — never dropped with the message."""
    payment = await payments.lock(event.saga_id)
    change = decide(payment)
    if payment is None and change.status is not None:
        if await payments.record_without_charge(saga_id=event.saga_id,
                                                order_id=event.payload.order_id,
                                                customer_id=customer_of(event),
                                                status=change.status):
            await uow.commit()
            return
        payment = await payments.lock(event.saga_id)
        if payment is None:  # the unique key refused it: the row exists
            raise TransientError("payment created concurrently and not visible yet")
        change = decide(payment)
    await _apply(uow, payments, kick, event, change, payment)


async def _apply(uow: UnitOfWorkPort, payments: PaymentStore, kick: Callable[[], None],
                 event: Compensated, change: domain.Change, payment: Payment | None) -> None:
    current = payment.status if payment else None
    if payment is not None and change.allocation_failed:
        await payments.record_allocation_failed(payment)
    if change.refused is not None:
        _refused(uow, event, change.refused, payment)
    elif change.status is None or payment is None:
        log.info("nothing to compensate (payment %s)", current,
                 extra={"saga_id": event.saga_id, "event_type": event.event_type})
    else:
        due_now = change.retry_in_s is not None
        if due_now:
            uow.after_commit(kick)
        # Under the row lock the status holds: the conditional update applies.
        await payments.move(payment, change.status, due_now=due_now,
                            clear_token=change.status not in domain.TOKEN_NEEDED)
        log.info("payment %s -> %s", current, change.status,
                 extra={"saga_id": event.saga_id, "event_type": event.event_type,
                        "status": "COMPENSATING"})
    await uow.commit()


def _refused(uow: UnitOfWorkPort, event: Compensated, reason: domain.Refusal,
             payment: Payment | None) -> None:
    """Once the message is recorded as processed: counted and logged. Refusing is the outcome
    of handling it (a replay could only refuse it again): it is not dead-lettered."""
    def counted() -> None:
        metrics.REFUNDS_REFUSED.labels(SERVICE, reason.value).inc()
        log.warning("compensation refused: %s", reason.value, extra={
            "saga_id": event.saga_id, "event_type": event.event_type,
            "message_id": event.message_id, "reason": reason.value,
            "status": payment.status.value if payment else None})
    uow.after_commit(counted)
