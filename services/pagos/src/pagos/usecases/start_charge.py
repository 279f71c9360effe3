"""StockVerificado → a payment row due for charging now. The gateway call itself happens in the
gateway worker, after this transaction committed (never inside it).

When the worker has a free slot, this transaction also leases the row to it and the call
starts as soon as the commit is through: the lease a separate claim transaction would take,
taken here in the same statement (one transaction less per saga, and the charge no longer
waits for the worker to wake and claim it). A crash after the commit leaves a leased row that
falls due when its lease runs out, exactly as a crash after a claim does. The payment and the
inbox row go in one statement, which is the whole transaction.
"""

from __future__ import annotations

import logging
from decimal import Decimal

from sagakit import tracing
from sagakit.consumer import Handler
from sagakit.envelope import Envelope
from sagakit.unit_of_work import UnitOfWork

from pagos.adapters.payment_repository import Payment, PaymentRepository
from pagos.usecases.gateway_worker import GatewayWorker

log = logging.getLogger("pagos.start_charge")


def make_on_stock_verificado(worker: GatewayWorker) -> Handler:
    async def on_stock_verificado(uow: UnitOfWork, event: Envelope) -> None:
        p = event.payload
        slot = worker.reserve()
        try:
            # The payment, the inbox row and nothing else: one statement, its own transaction.
            uow.stage(PaymentRepository.new_charge(
                saga_id=event.saga_id, order_id=p["order_id"],
                amount=Decimal(p["total_amount"]), currency=p["currency"],
                token=p["payment_method"]["token"],
                lease_s=worker.settings.lease_s if slot else None,
                trigger={"message_id": event.message_id, "event_type": event.event_type,
                         "span_id": event.span_id,
                         "traceparent": tracing.current_traceparent()}))
            await uow.commit()
            if not uow.returned:
                # Cancelled before stock was verified, or already charging: never charge twice.
                log.info("charge not started: saga already has a payment",
                         extra={"saga_id": event.saga_id, "event_type": event.event_type})
            elif slot is not None:
                worker.start(slot, Payment.from_row(uow.returned[0], leased=True))
            else:
                worker.kick()
        finally:
            if slot is not None:
                worker.release(slot)  # unused: the transaction did not commit

    return on_stock_verificado
