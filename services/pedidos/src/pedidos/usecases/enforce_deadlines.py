"""The persistent timers: step deadlines and the saga deadline, judged by the database clock.

A periodic scan finds active sagas past a deadline; each is handled in its own unit of work
under its row lock (SKIP LOCKED, so scanners of several instances share the work and never
block a saga that an event is moving right now).
"""

from __future__ import annotations

import logging
import uuid

from sagakit import metrics, tracing
from sagakit.runtime import Runtime

from pedidos.adapters.order_repository import OrderRepository
from pedidos.config import PedidosSettings
from pedidos.domain.order import STEP_OF, on_saga_deadline, on_step_deadline
from pedidos.usecases.transitions import apply_transition

log = logging.getLogger("pedidos.deadlines")


async def enforce_deadlines(rt: Runtime, settings: PedidosSettings, batch: int = 100) -> int:
    async with rt.engine.connect() as conn:
        due = await OrderRepository(conn).due_sagas(batch)
    handled = 0
    for saga_id in due:
        handled += await _enforce(rt, settings, saga_id)
    return handled


async def _enforce(rt: Runtime, settings: PedidosSettings, saga_id: str) -> int:
    async with rt.engine.connect() as conn:
        stored = await OrderRepository(conn).saga(uuid.UUID(saga_id))
    # The timer's work belongs to the saga's trace, continued from where the saga started.
    parent = tracing.context_from((stored or {}).get("context", {}).get("traceparent"))
    with tracing.tracer().start_as_current_span("deadline check", context=parent,
                                                attributes=tracing.attributes(id=saga_id)):
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
                         saga_id=saga.saga_id)
                await apply_transition(uow, saga, transition, cause="SagaExpirada",
                                       actor="pedidos.deadlines", settings=settings)
                uow.after_commit(metrics.ALERTS.labels("pedidos", "saga_expired", "high").inc)
                log.error("saga expired", extra={"saga_id": saga.saga_id,
                                                 "event_type": "SagaExpirada",
                                                 "status": "COMPENSATING"})
            elif saga.step_deadline_at is not None and saga.step_deadline_at <= saga.db_now:
                transition = on_step_deadline(saga.status)
                if transition is None:
                    return 0
                step = STEP_OF[saga.status]
                uow.emit("StepTimedOut", {"order_id": saga.order_id, "step": step,
                                          "elapsed_ms": saga.step_elapsed_ms},
                         saga_id=saga.saga_id)
                await apply_transition(uow, saga, transition, cause="StepTimedOut",
                                       actor="pedidos.deadlines", settings=settings,
                                       detail={"step": step, "elapsed_ms": saga.step_elapsed_ms})
                uow.after_commit(metrics.STEP_TIMEOUTS.labels("pedidos", step).inc)
                log.error("step timed out", extra={"saga_id": saga.saga_id,
                                                   "event_type": "StepTimedOut", "step": step,
                                                   "status": "COMPENSATING"})
            else:
                return 0
            await uow.commit()
            return 1
