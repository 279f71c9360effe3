"""FalloAsignacion or OrdenCancelada → refund the charge, resolve it, or make sure it never
happens."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sagakit.consumer import Handler
from sagakit.envelope import Envelope
from sagakit.errors import TransientError
from sagakit.store.unit_of_work import UnitOfWork
from sqlalchemy import func

from pagos.adapters.payment_repository import Payment, PaymentRepository
from pagos.domain import payment as domain

log = logging.getLogger("pagos.compensate")


def make_compensation_handlers(kick: Callable[[], None]) -> tuple[Handler, Handler]:
    async def locked(uow: UnitOfWork, event: Envelope,
                     decide: Callable[[Payment | None], domain.Change]) -> None:
        """Decides on the payment under its row lock and applies the change in the same
        transaction. StockVerificado arrives on another topic, in another lane: its charge can
        be created between this handler finding no payment and recording one. Then the saga's
        unique key refuses this handler's row, and the charge that won is locked and decided
        on like any other (the INSERT waited for it to commit, and READ COMMITTED lets the next
        statement see it) — never dropped with the message."""
        repo = PaymentRepository(uow.connection)
        payment = await repo.lock(event.saga_id)
        change = decide(payment)
        if payment is None and change.status is not None:
            if await repo.insert(saga_id=event.saga_id, order_id=event.payload.get("order_id"),
                                 status=change.status):
                await uow.commit()
                return
            payment = await repo.lock(event.saga_id)
            if payment is None:  # the unique key refused it: the row exists
                raise TransientError("payment created concurrently and not visible yet")
            change = decide(payment)
        await apply(uow, event, change, payment)

    async def apply(uow: UnitOfWork, event: Envelope, change: domain.Change,
                    payment: Payment | None) -> None:
        current = payment.status if payment else None
        if change.status is None or payment is None:
            log.info("nothing to compensate (payment %s)", current,
                     extra={"saga_id": event.saga_id, "event_type": event.event_type})
        else:
            values: dict[str, Any] = {"status": change.status.value}
            if change.retry_in_s is not None:
                values["next_attempt_at"] = func.now()
                uow.after_commit(kick)
            if change.status not in domain.TOKEN_NEEDED:
                values["payment_token"] = None
            # Under the row lock the status holds: the conditional update applies.
            await PaymentRepository(uow.connection).update(event.saga_id, payment.status,
                                                           **values)
            log.info("payment %s -> %s", current, change.status,
                     extra={"saga_id": event.saga_id, "event_type": event.event_type,
                            "status": "COMPENSATING"})
        await uow.commit()

    async def on_fallo_asignacion(uow: UnitOfWork, event: Envelope) -> None:
        await locked(uow, event, lambda p: domain.on_allocation_failed(
            p.status if p else None, bool(p and p.charge_sent)))

    async def on_orden_cancelada(uow: UnitOfWork, event: Envelope) -> None:
        await locked(uow, event, lambda p: domain.on_order_cancelled(
            p.status if p else None, bool(p and p.charge_sent)))

    return on_fallo_asignacion, on_orden_cancelada
