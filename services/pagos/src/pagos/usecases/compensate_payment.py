"""FalloAsignacion or OrdenCancelada → refund the charge, or make sure it never happens."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sagakit.consumer import Handler
from sagakit.envelope import Envelope
from sagakit.unit_of_work import UnitOfWork
from sqlalchemy import func

from pagos.adapters.payment_repository import PaymentRepository
from pagos.domain import payment as domain

log = logging.getLogger("pagos.compensate")


def make_compensation_handlers(kick: Callable[[], None]) -> tuple[Handler, Handler]:
    async def apply(uow: UnitOfWork, event: Envelope, change: domain.Change,
                    current: domain.PaymentStatus | None) -> None:
        repo = PaymentRepository(uow.connection)
        if change.status is None:
            log.info("nothing to compensate (payment %s)", current,
                     extra={"saga_id": event.saga_id, "event_type": event.event_type})
        elif current is None:
            await repo.insert(saga_id=event.saga_id, order_id=event.payload.get("order_id"),
                              status=change.status)
        else:
            values: dict[str, Any] = {"status": change.status.value}
            if change.retry_in_s is not None:
                values["next_attempt_at"] = func.now()
                uow.after_commit(kick)
            if change.status is domain.PaymentStatus.CANCELLED:
                values["payment_token"] = None
            await repo.update(event.saga_id, current, **values)
            log.info("payment %s -> %s", current, change.status,
                     extra={"saga_id": event.saga_id, "event_type": event.event_type,
                            "status": "COMPENSATING"})
        await uow.commit()

    async def on_fallo_asignacion(uow: UnitOfWork, event: Envelope) -> None:
        payment = await PaymentRepository(uow.connection).lock(event.saga_id)
        current = payment.status if payment else None
        await apply(uow, event, domain.on_allocation_failed(current), current)

    async def on_orden_cancelada(uow: UnitOfWork, event: Envelope) -> None:
        payment = await PaymentRepository(uow.connection).lock(event.saga_id)
        current = payment.status if payment else None
        attempted = bool(payment and (payment.charge_attempts > 0 or payment.leased))
        await apply(uow, event, domain.on_order_cancelled(current, attempted), current)

    return on_fallo_asignacion, on_orden_cancelada
