"""StockVerificado → a payment row due for charging now. The gateway call itself happens in the
gateway worker, after this transaction committed (never inside it)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from decimal import Decimal

from sagakit import tracing
from sagakit.consumer import Handler
from sagakit.envelope import Envelope
from sagakit.unit_of_work import UnitOfWork

from pagos.adapters.payment_repository import PaymentRepository
from pagos.domain.payment import PaymentStatus

log = logging.getLogger("pagos.start_charge")


def make_on_stock_verificado(kick: Callable[[], None]) -> Handler:
    async def on_stock_verificado(uow: UnitOfWork, event: Envelope) -> None:
        p = event.payload
        repo = PaymentRepository(uow.connection)
        created = await repo.insert(
            saga_id=event.saga_id, order_id=p["order_id"], status=PaymentStatus.CHARGING,
            amount=Decimal(p["total_amount"]), currency=p["currency"],
            token=p["payment_method"]["token"], due_now=True,
            trigger={"message_id": event.message_id, "event_type": event.event_type,
                     "span_id": event.span_id, "traceparent": tracing.current_traceparent()})
        if not created:
            # Cancelled before stock was verified, or already charging: never charge twice.
            log.info("charge not started: saga already has a payment",
                     extra={"saga_id": event.saga_id, "event_type": event.event_type})
        else:
            uow.after_commit(kick)
        await uow.commit()

    return on_stock_verificado
