"""The persistent timers: step deadlines and the saga deadline, judged by the database clock.

A periodic scan finds active sagas past a deadline; each is handled in its own unit of work
under its row lock (SKIP LOCKED, so scanners of several instances share the work and never
block a saga that an event is moving right now).
"""

from __future__ import annotations

import logging

from sagakit import metrics
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
        async with rt.uow() as uow:
            repo = OrderRepository(uow.connection)
            saga = await repo.lock_saga(saga_id, skip_locked=True)
            if saga is None:
                continue
            if saga.expires_at <= saga.db_now:
                transition = on_saga_deadline(saga.status)
                if transition is None:
                    continue
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
                    continue
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
                continue
            await uow.commit()
            handled += 1
    return handled
