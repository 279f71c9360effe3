"""The persistent timers: step deadlines and the saga deadline, judged by the database clock.

A scan finds active sagas past a deadline; each is handled in its own unit of work under its
row lock (SKIP LOCKED, so scanners of several instances share the work and never block a saga
that an event is moving right now). The scan runs again when the earliest deadline still to
come falls due, and at least every ``deadline_scan_interval_s``: an idle service reads the
table once every few seconds, and a deadline is acted on as it passes, not up to a polling
interval later.
"""

from __future__ import annotations

import logging

from pedidos.config import PedidosSettings
from pedidos.domain.order import STEP_OF, on_saga_deadline, on_step_deadline
from pedidos.usecases import order_events
from pedidos.usecases.ports import Deadlines, OrderUnits
from pedidos.usecases.transitions import stage_transition
from sagakit.envelope import new_span_id
from sagakit.observability import metrics, tracing
from sagakit.runtime import RunAgainIn

log = logging.getLogger("pedidos.deadlines")


# Wake a little after the deadline, not a hair before it (then there is nothing to do yet).
_MARGIN_S = 0.02


async def enforce_deadlines(deadlines: Deadlines, units: OrderUnits, settings: PedidosSettings,
                            batch: int = 100) -> RunAgainIn:
    """Handles the sagas past a deadline, each in a unit of work of its own (``units``); says
    when to look again: when the earliest deadline still to come falls due, at the latest
    after ``deadline_scan_interval_s`` (sagas started meanwhile by other instances, sagas
    skipped because an event held their lock)."""
    due = await deadlines.due(batch)
    for saga_id in due.saga_ids:
        await enforce_deadline(deadlines, units, settings, saga_id)
    if due.seconds_to_next is None:
        return RunAgainIn(settings.deadline_scan_interval_s)
    return RunAgainIn(due.seconds_to_next + _MARGIN_S)


async def enforce_deadline(deadlines: Deadlines, units: OrderUnits, settings: PedidosSettings,
                           saga_id: str) -> int:
    """1 if the saga was timed out, 0 if it was not (no longer due, or another holds it)."""
    # The timer's work belongs to the saga's trace, continued from where the saga started.
    traceparent = await deadlines.traceparent_of(saga_id)
    # The deadline check is the span the timer's messages hang from (docs/standard.md#saga-and-span-ids).
    span_id = new_span_id()
    with tracing.span("deadline check", traceparent=traceparent,
                      attributes=tracing.attributes(id=saga_id)):
        tracing.annotate_current_span(span_id=span_id)
        async with units() as (uow, orders):
            saga = await orders.lock(saga_id, skip_locked=True)
            if saga is None:
                return 0
            if saga.expires_at <= saga.db_now:
                transition = on_saga_deadline(saga.status)
                if transition is None:
                    return 0
                uow.emit(order_events.saga_expirada(saga), saga_id=saga.saga_id,
                         parent_span_id=span_id)
                stage_transition(uow, orders, saga, transition, cause="SagaExpirada",
                                 actor="pedidos.deadlines", settings=settings,
                                 parent_span_id=span_id)
                uow.after_commit(metrics.ALERTS.labels("pedidos", "saga_expired", "high").inc)
                log.error("saga expired", extra={"saga_id": saga.saga_id, "span_id": span_id,
                                                 "event_type": "SagaExpirada",
                                                 "status": "COMPENSATING"})
            elif saga.step_deadline_at is not None and saga.step_deadline_at <= saga.db_now:
                transition = on_step_deadline(saga.status)
                if transition is None:
                    return 0
                step = STEP_OF[saga.status]
                uow.emit(order_events.step_timed_out(saga, step), saga_id=saga.saga_id,
                         parent_span_id=span_id)
                stage_transition(uow, orders, saga, transition, cause="StepTimedOut",
                                 actor="pedidos.deadlines", settings=settings,
                                 detail={"step": step, "elapsed_ms": saga.step_elapsed_ms},
                                 parent_span_id=span_id)
                uow.after_commit(metrics.STEP_TIMEOUTS.labels("pedidos", step).inc)
                log.error("step timed out", extra={"saga_id": saga.saga_id, "span_id": span_id,
                                                   "event_type": "StepTimedOut", "step": step,
                                                   "status": "COMPENSATING"})
            else:
                return 0
            # Under the row lock the status holds: the transition's guard finds it.
            return 1 if await uow.commit() else 0
