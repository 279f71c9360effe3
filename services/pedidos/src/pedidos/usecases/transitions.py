"""Stages a decided transition on the caller's unit of work: the saga's move with its audit
row and customer notification (``OrderStore.move``), its events, and the metrics once it
commits. Nothing of it is written if the saga is no longer in the status the decision was
taken on (``commit`` then returns False)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pedidos.config import PedidosSettings
from pedidos.domain.order import (
    NOTIFICATIONS,
    SAGA_TYPE,
    STEP_OF,
    CancelReason,
    Transition,
    final_status_label,
)
from pedidos.usecases import order_events
from pedidos.usecases.ports import AuditEntry, OperatorAction, OrderStore, SagaState
from sagakit.observability import metrics
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("pedidos.transitions")


def stage_transition(uow: UnitOfWorkPort, orders: OrderStore, saga: SagaState,
                     transition: Transition, *,
                     cause: str, actor: str, settings: PedidosSettings,
                     message_id: str | None = None,
                     detail: dict[str, Any] | None = None,
                     order_values: dict[str, Any] | None = None,
                     parent_span_id: str | None = None,
                     operator_action: OperatorAction | None = None,
                     step_deadline_by: datetime | None = None) -> None:
    """``parent_span_id``: the span the transition happens in when it is not a message's (a
    request's, a timer's): the parent of the events it emits (docs/standard.md#saga-and-span-ids).
    ``operator_action``: the operator's action that asked for it, audited with it.
    ``step_deadline_by``: the latest the step it starts may fall due (its timeout's deadline
    if that is earlier)."""
    values = dict(order_values or {})
    if transition.cancel_reason:
        values["cancel_reason"] = transition.cancel_reason.value
    if transition.refund_status:
        values["refund_status"] = transition.refund_status.value
    step = STEP_OF.get(transition.to)
    orders.move(saga, transition.to,
                step_timeout_s=settings.step_timeout_s(step) if step else None,
                audit=AuditEntry(cause, actor, message_id, detail),
                notification=NOTIFICATIONS.get(transition.to),
                operator_action=operator_action, step_deadline_by=step_deadline_by, **values)
    # The saga's customer, as OrdenSolicitada named it (its user_id,
    # docs/standard.md#saga-and-span-ids), also when no message caused the transition (a
    # cancellation requested, a deadline): pagos reads it to know whose payment it records.
    customer = {"user_id": saga.customer_id}
    if transition.completes:
        uow.emit(order_events.orden_completada(saga), saga_id=saga.saga_id,
                 parent_span_id=parent_span_id, metadata=customer)
    elif transition.cancels:
        reason = transition.cancel_reason or CancelReason.TIMEOUT
        uow.emit(order_events.orden_cancelada(saga, transition.to, reason),
                 saga_id=saga.saga_id, parent_span_id=parent_span_id, metadata=customer)

    def committed() -> None:
        # The row the commit statement moved, by the database clock of that statement (``saga``
        # may be a row this process wrote earlier: its clock is that write's).
        moved = orders.written()
        if transition.completes or transition.cancels:
            metrics.SAGA_DURATION.labels(SAGA_TYPE, final_status_label(transition.to)).observe(
                moved.elapsed_s)
            metrics.SAGAS_FINISHED.labels(SAGA_TYPE, transition.to.value).inc()
            if transition.cancels:
                metrics.COMPENSATIONS.labels("pedidos", (transition.cancel_reason
                                                         or CancelReason.TIMEOUT).value).inc()
        log.info("order %s -> %s", saga.status.value, transition.to.value,
                 extra={"saga_id": saga.saga_id, "event_type": cause, "order_id": saga.order_id,
                        "status": "COMPENSATING" if transition.cancels else "SUCCESS"})

    uow.after_commit(committed)
