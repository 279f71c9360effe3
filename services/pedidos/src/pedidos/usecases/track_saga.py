"""Every event of the saga that pedidos listens to: decide, apply, record.

One handler serves all of them because the decision is the state machine's; this module only
reads the saga and writes what the machine decided. It takes no lock: the write (with the inbox
and outbox rows) is one statement that applies only if the saga is still as the decision found
it: its status, and whether a StockAsignado that came before the payment was recorded (both
decide a PagoExitoso). If another event, a deadline or another instance moved it meanwhile,
nothing is written and the consumer runs the handler again at once, on the saga as it is now.

A PagoExitoso that does not pay the order's total in its currency is not the order's payment:
it is recorded in the saga's history as ignored (without its charge id, which is not this
order's charge), moves nothing, and is logged and counted in ``saga_payment_mismatch_total``,
which raises an alert.

A StockAsignado that overtakes the order's PagoExitoso (they travel on different topics) moves
nothing: the saga records that its stock is allocated, and the PagoExitoso completes the order
when it comes. Whichever of the two commits second was decided on a row the first one changed,
finds its guard gone, and is decided again on the row as it is now: the order completes once,
with one OrdenCompletada, in either order.

A StockVerificado that says inventario holds the units until ``reserved_until``
(reserve_then_pay) starts a payment step that falls due ``RESERVATION_MARGIN_S`` before then
at the latest, however much of its timeout that leaves: the reservation may have been taken
late in the validation step, and a payment made within the step must find its units held.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any, TypeAlias, get_args

from pedidos import metrics as pedidos_metrics
from pedidos.config import RESERVATION_MARGIN_S, PedidosSettings
from pedidos.domain.order import (
    AllocationBeforePayment,
    Annotation,
    Money,
    PaymentMismatch,
    Transition,
    on_event,
    payment_mismatch,
)
from pedidos.usecases.ports import AuditEntry, OrderStore, SagaState
from pedidos.usecases.transitions import stage_transition
from saga_contracts.events.inventory import (
    FalloAsignacion,
    PrecioRechazado,
    PrecioRechazado_v2,
    StockAsignado,
    StockNoDisponible,
    StockVerificado,
)
from saga_contracts.events.payments import (
    FalloReembolso,
    PagoExitoso,
    PagoRechazado,
    ReembolsoEjecutado,
)
from sagakit.errors import PermanentError
from sagakit.message import Message
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("pedidos.track_saga")

# Every participant event pedidos tracks, listed once: the handler's type, and the models the
# consumer subscribes to (pedidos.app).
Tracked: TypeAlias = (StockVerificado | StockNoDisponible | PrecioRechazado | PrecioRechazado_v2
                      | PagoExitoso | PagoRechazado | StockAsignado | FalloAsignacion | ReembolsoEjecutado
                      | FalloReembolso)
TRACKED_EVENTS: tuple[type[Tracked], ...] = get_args(Tracked)


def _payment_step_by(event: Tracked) -> datetime | None:
    """The latest a payment step started by ``event`` may fall due: ``RESERVATION_MARGIN_S``
    before the units inventario reserved for the saga stop being held. A payment that succeeds
    within the step then finds them still held; past it the saga times out and its
    cancellation releases them. None: nothing was reserved (Check-Then-Pay)."""
    if not isinstance(event, StockVerificado) or event.reserved_until is None:
        return None
    until = datetime.fromisoformat(event.reserved_until)
    return until - timedelta(seconds=RESERVATION_MARGIN_S)


def _strategy_ran(verified: StockVerificado) -> dict[str, str]:
    """Which allocation strategy inventario ran, and until when it holds the units if it
    reserved them: the saga's history shows them (absent from a StockVerificado before 4.1)."""
    ran = {"allocation_strategy": verified.allocation_strategy,
           "reserved_until": verified.reserved_until}
    return {name: value for name, value in ran.items() if value is not None}


async def track_saga(uow: UnitOfWorkPort, orders: OrderStore, event: Message[Tracked],
                     settings: PedidosSettings) -> None:
    saga = await orders.read(event.saga_id)
    if saga is None:
        raise PermanentError(f"unknown saga {event.saga_id}")
    detail: dict[str, Any] = {"source_service": event.source_service}
    order_values: dict[str, Any] = {}
    mismatch = None
    if isinstance(event.payload, StockVerificado):
        detail.update(_strategy_ran(event.payload))
    if isinstance(event.payload, PagoRechazado):
        # A decline counts against the decline limits whatever became of the order (its
        # customer may have cancelled it first): from when pagos told it.
        order_values["payment_declined_at"] = datetime.fromisoformat(event.envelope.timestamp)
    if isinstance(event.payload, PagoExitoso):
        paid = Money(event.payload.amount, event.payload.currency)
        mismatch = payment_mismatch(Money(saga.total_amount, saga.currency), paid)
        if mismatch is None:
            order_values["charge_id"] = event.payload.charge_id
        else:
            detail.update(payment_mismatch=mismatch.value, paid_amount=f"{paid.amount:.2f}",
                          paid_currency=paid.currency)
            _count_mismatch(uow, event, mismatch)
    decision = None if mismatch else on_event(saga.status, event.event_type,
                                              stock_allocated=saga.stock_allocated)
    if isinstance(decision, Transition):
        stage_transition(uow, orders, saga, decision, cause=event.event_type,
                         actor=event.source_service, settings=settings,
                         message_id=event.message_id, detail=detail,
                         order_values=order_values,
                         step_deadline_by=_payment_step_by(event.payload))
    elif isinstance(decision, AllocationBeforePayment):
        _stage_allocation(uow, orders, saga, event, detail)
    else:
        if isinstance(decision, Annotation):
            order_values["refund_status"] = decision.refund_status.value
        # Stale, late or duplicate-by-meaning: recorded in the history, state unchanged.
        orders.record_unmoved(
            saga, AuditEntry(event.event_type, event.source_service, event.message_id,
                             {**detail, "ignored": decision is None,
                              **({"refund_status": decision.refund_status.value}
                                 if isinstance(decision, Annotation) else {})}),
            **order_values)
        uow.after_commit(lambda: log.info(
            "event does not move the order (%s)", saga.status.value,
            extra={"saga_id": event.saga_id, "event_type": event.event_type}))
    # False (nothing written) if the saga moved since it was read: the consumer retries.
    await uow.commit()


def _stage_allocation(uow: UnitOfWorkPort, orders: OrderStore, saga: SagaState,
                      event: Message[Tracked], detail: dict[str, Any]) -> None:
    """The stock allocated before the payment: recorded, the saga left where it is, its
    deadline running (if no payment comes, the deadline cancels the order and OrdenCancelada
    makes inventario release the stock)."""
    orders.record_allocation(saga, AuditEntry(
        event.event_type, event.source_service, event.message_id,
        {**detail, "ignored": False, "awaiting": "PagoExitoso"}))
    uow.after_commit(lambda: log.info(
        "stock allocated before the payment: waiting for it (%s)", saga.status.value,
        extra={"saga_id": event.saga_id, "event_type": event.event_type}))


def _count_mismatch(uow: UnitOfWorkPort, event: Message[Tracked],
                    mismatch: PaymentMismatch) -> None:
    """Once the history records it: counted and logged (the amounts are in the history)."""
    def counted() -> None:
        pedidos_metrics.PAYMENT_MISMATCHES.labels("pedidos", mismatch.value).inc()
        log.warning("payment event ignored: %s", mismatch.value,
                    extra={"saga_id": event.saga_id, "event_type": event.event_type,
                           "reason": mismatch.value})
    uow.after_commit(counted)
