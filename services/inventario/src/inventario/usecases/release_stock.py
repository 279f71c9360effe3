"""OrdenCancelada → StockLiberado when stock was allocated (compensation).

Idempotent: the allocation's transition ALLOCATED → RELEASED happens once. When nothing was
allocated yet, the saga is marked BLOCKED so a late PagoExitoso never allocates for a cancelled
order, and its stock check is closed if it has none: a validation that read the saga before
this committed finds the check taken at its commit and writes nothing (no reservation for a
cancelled saga); handled again, it reads the saga blocked.

A reservation the saga holds (reserve_then_pay) is released with it, RESERVED → RELEASED once:
whatever the order's allocation, a cancelled saga holds no units.
"""

from __future__ import annotations

import logging

from inventario import metrics as metrics_inventario
from inventario.domain.stock import ReleaseDecision, on_order_cancelled
from inventario.metrics import ReservationOutcome
from inventario.usecases.event_parts import stock_lines
from inventario.usecases.ports import StockStore
from saga_contracts.events.inventory import StockLiberado
from saga_contracts.events.orders import OrdenCancelada
from sagakit.errors import TransientError
from sagakit.message import Message
from sagakit.observability import metrics
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("inventario.release_stock")


async def release_stock(uow: UnitOfWorkPort, stock: StockStore,
                        event: Message[OrdenCancelada]) -> None:
    order_id = event.payload.order_id
    existing = await stock.lock_allocation(event.saga_id)
    decision = on_order_cancelled(existing[0] if existing else None)
    if decision is ReleaseDecision.BLOCK:
        if not await stock.block(event.saga_id, order_id):
            # An allocation committed meanwhile: retry sees it and releases it.
            raise TransientError("allocation appeared concurrently")
    elif decision is ReleaseDecision.RELEASE:
        assert existing is not None
        lines = existing[1]
        await stock.release(event.saga_id, lines)
        uow.emit(StockLiberado(order_id=order_id, items=stock_lines(lines)))
        uow.after_commit(lambda: metrics.COMPENSATIONS.labels("inventario",
                                                              event.payload.reason).inc())
        log.info("stock released", extra={"saga_id": event.saga_id,
                                          "event_type": event.event_type,
                                          "status": "COMPENSATED"})
    # After the allocation's row, as the allocation's commit statement takes them (its row,
    # then the reservation's): a cancel racing a confirm waits, never deadlocks.
    released = await stock.release_reservation(event.saga_id)
    if released:
        def counted() -> None:
            metrics_inventario.RESERVATIONS.labels(
                "inventario", ReservationOutcome.RELEASED).inc(released)
            log.info("reservation released", extra={"saga_id": event.saga_id,
                                                     "event_type": event.event_type})
        uow.after_commit(counted)
    await uow.commit()
