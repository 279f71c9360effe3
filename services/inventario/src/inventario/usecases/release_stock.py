"""OrdenCancelada → StockLiberado when stock was allocated (compensation).

Idempotent: the allocation row's conditional transition ALLOCATED → RELEASED happens once.
When nothing was allocated yet, the saga is marked BLOCKED so a late PagoExitoso never
allocates for a cancelled order.
"""

from __future__ import annotations

import logging

from sagakit.envelope import Envelope
from sagakit.errors import TransientError
from sagakit.observability import metrics
from sagakit.store.unit_of_work import UnitOfWork

from inventario.adapters.stock_repository import StockRepository, lines_to_json
from inventario.domain.stock import AllocationStatus, ReleaseDecision, on_order_cancelled

log = logging.getLogger("inventario.release_stock")


async def on_orden_cancelada(uow: UnitOfWork, event: Envelope) -> None:
    repo = StockRepository(uow.connection)
    order_id = event.payload["order_id"]
    existing = await repo.lock_allocation(event.saga_id)
    decision = on_order_cancelled(existing[0] if existing else None)
    if decision is ReleaseDecision.BLOCK:
        if not await repo.insert_allocation(event.saga_id, order_id, AllocationStatus.BLOCKED,
                                            []):
            # An allocation committed meanwhile: retry sees it and releases it.
            raise TransientError("allocation appeared concurrently")
    elif decision is ReleaseDecision.RELEASE:
        assert existing is not None
        lines = existing[1]
        await repo.put_back(lines)
        await repo.transition_allocation(event.saga_id, AllocationStatus.ALLOCATED,
                                         AllocationStatus.RELEASED)
        uow.emit("StockLiberado", {"order_id": order_id, "items": lines_to_json(lines)})
        uow.after_commit(lambda: metrics.COMPENSATIONS.labels("inventario",
                                                              event.payload["reason"]).inc())
        log.info("stock released", extra={"saga_id": event.saga_id,
                                          "event_type": event.event_type,
                                          "status": "COMPENSATED"})
    await uow.commit()
