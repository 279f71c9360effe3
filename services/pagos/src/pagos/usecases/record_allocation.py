"""StockAsignado → the payment records that its stock was allocated: the goods are the
customer's, and a FalloAsignacion for the saga refunds nothing from then on
(pagos.domain.payment).

Every paid saga that completes sends one, so the handler takes no lock: it reads the payment
outside a transaction and writes with its commit statement alone, guarded by what it read. The
gateway worker or a cancellation (another topic) may move the payment meanwhile; then nothing
is written and the message is handled again on the payment as it is now. A FalloAsignacion of
the saga cannot run in between: inventario writes both on the saga's partition of
inventory-events, which pagos handles in order.

A StockAsignado that finds nothing to record on (an unknown saga, a payment never captured, or
another order's) is logged and left: it is recorded as processed, not dead-lettered, as a
FalloAsignacion for an unknown saga is.
"""

from __future__ import annotations

import logging

from pagos.domain import payment as domain
from pagos.domain.payment import Allocation
from pagos.usecases.ports import PaymentStore
from saga_contracts.events.inventory import StockAsignado
from sagakit.message import Message
from sagakit.observability import metrics
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("pagos.record_allocation")
SERVICE = "pagos"


async def record_allocation(uow: UnitOfWorkPort, payments: PaymentStore,
                            event: Message[StockAsignado]) -> None:
    payment = await payments.read(event.saga_id)
    allocation = domain.on_stock_allocated(payment, event.payload.order_id)
    if allocation.recorded:
        assert payment is not None
        payments.record_stock_allocated(payment)
    extra = {"saga_id": event.saga_id, "event_type": event.event_type,
             "message_id": event.message_id,
             "status": payment.status.value if payment else None}
    if allocation is Allocation.CONTRADICTS:
        alert = domain.ALLOCATION_CONTRADICTED
        uow.after_commit(lambda: metrics.ALERTS.labels(SERVICE, alert, "critical").inc())
        uow.after_commit(lambda: log.critical(
            "payment alert: %s", alert,
            extra={**extra, "alert": alert, "severity": "critical"}))
    elif allocation in (Allocation.NO_PAYMENT, Allocation.NOT_CAPTURED,
                        Allocation.ORDER_MISMATCH):
        uow.after_commit(lambda: log.warning("stock allocation not recorded: %s",
                                             allocation.value, extra=extra))
    elif allocation is Allocation.DUPLICATE:
        uow.after_commit(lambda: log.info("stock allocation recorded before", extra=extra))
    await uow.commit()
