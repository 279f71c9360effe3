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
import uuid

from sagakit.envelope import new_span_id
from sagakit.observability import metrics, tracing
from sagakit.runtime import RunAgainIn, Runtime

from pedidos.adapters.known_sagas import known_sagas_of
from pedidos.adapters.order_repository import OrderRepository
from pedidos.config import PedidosSettings
from pedidos.domain.order import STEP_OF, on_saga_deadline, on_step_deadline
from pedidos.usecases.transitions import stage_transition

log = logging.getLogger("pedidos.deadlines")


# Wake a little after the deadline, not a hair before it (then there is nothing to do yet).
_MARGIN_S = 0.02


async def enforce_deadlines(rt: Runtime, settings: PedidosSettings, batch: int = 100
                            ) -> RunAgainIn:
    """Handles the sagas past a deadline; says when to look again: when the earliest deadline
    still to come falls due, at the latest after ``deadline_scan_interval_s`` (sagas started
    meanwhile by other instances, sagas skipped because an event held their lock)."""
    async with rt.engine.connect() as conn:
        repo = OrderRepository(conn)
        due = await repo.due_sagas(batch)
        next_due_s = await repo.seconds_to_next_deadline() if len(due) < batch else 0.0
    for saga_id in due:
        await _enforce(rt, settings, saga_id)
    if next_due_s is None:
        return RunAgainIn(settings.deadline_scan_interval_s)
    return RunAgainIn(next_due_s + _MARGIN_S)


async def _enforce(rt: Runtime, settings: PedidosSettings, saga_id: str) -> int:
    async with rt.engine.connect() as conn:
        stored = await OrderRepository(conn).saga(uuid.UUID(saga_id))
    # The timer's work belongs to the saga's trace, continued from where the saga started.
    traceparent = (stored or {}).get("context", {}).get("traceparent")
    # The deadline check is the span the timer's messages hang from (Part I §7.1).
    span_id = new_span_id()
    with tracing.span("deadline check", traceparent=traceparent,
                      attributes=tracing.attributes(id=saga_id)):
        tracing.annotate_current_span(span_id=span_id)
        async with rt.uow() as uow:
            repo = OrderRepository(uow.connection)
            saga = await repo.lock_saga(saga_id, skip_locked=True)
            if saga is None:
                return 0
            if saga.expires_at <= saga.db_now:
                transition = on_saga_deadline(saga.status)
                if transition is None:
                    return 0
                uow.emit("SagaExpirada", {"order_id": saga.order_id,
                                          "previous_status": saga.status.value,
                                          "elapsed_ms": int(saga.elapsed_s * 1000)},
                         saga_id=saga.saga_id, parent_span_id=span_id)
                stage_transition(uow, saga, transition, cause="SagaExpirada",
                                 actor="pedidos.deadlines", settings=settings,
                                 known=known_sagas_of(rt.extras), parent_span_id=span_id)
                uow.after_commit(metrics.ALERTS.labels("pedidos", "saga_expired", "high").inc)
                log.error("saga expired", extra={"saga_id": saga.saga_id, "span_id": span_id,
                                                 "event_type": "SagaExpirada",
                                                 "status": "COMPENSATING"})
            elif saga.step_deadline_at is not None and saga.step_deadline_at <= saga.db_now:
                transition = on_step_deadline(saga.status)
                if transition is None:
                    return 0
                step = STEP_OF[saga.status]
                uow.emit("StepTimedOut", {"order_id": saga.order_id, "step": step,
                                          "elapsed_ms": saga.step_elapsed_ms},
                         saga_id=saga.saga_id, parent_span_id=span_id)
                stage_transition(uow, saga, transition, cause="StepTimedOut",
                                 actor="pedidos.deadlines", settings=settings,
                                 detail={"step": step, "elapsed_ms": saga.step_elapsed_ms},
                                 known=known_sagas_of(rt.extras), parent_span_id=span_id)
                uow.after_commit(metrics.STEP_TIMEOUTS.labels("pedidos", step).inc)
                log.error("step timed out", extra={"saga_id": saga.saga_id, "span_id": span_id,
                                                   "event_type": "StepTimedOut", "step": step,
                                                   "status": "COMPENSATING"})
            else:
                return 0
            # Under the row lock the status holds: the transition's guard finds it.
            return 1 if await uow.commit() else 0
