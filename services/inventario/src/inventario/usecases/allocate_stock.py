"""PagoExitoso → StockAsignado | FalloAsignacion, under REPEATABLE READ and row locks.

The saga's allocation row and its products (in SKU order) are locked by the transaction's first
statement (SELECT … FOR UPDATE), re-checked, and either decremented or left alone; the
transaction commits either way so that the outcome event is published. The allocation row (and
the units taken) go with the commit statement: four round trips (BEGIN, locks, commit
statement, COMMIT).
"""

from __future__ import annotations

import logging

from sagakit.consumer import Handler
from sagakit.envelope import Envelope
from sagakit.errors import PermanentError
from sagakit.unit_of_work import UnitOfWork

from inventario.adapters.stock_repository import StockRepository, lines_to_json
from inventario.config import InventarioSettings
from inventario.domain.stock import (
    AllocationDecision,
    AllocationStatus,
    on_payment_succeeded,
    shortages,
)

log = logging.getLogger("inventario.allocate_stock")


def make_on_pago_exitoso(settings: InventarioSettings) -> Handler:
    async def on_pago_exitoso(uow: UnitOfWork, event: Envelope) -> None:
        await allocate(uow, event, settings)

    on_pago_exitoso.isolation_level = "REPEATABLE READ"  # type: ignore[attr-defined]
    return on_pago_exitoso


async def allocate(uow: UnitOfWork, event: Envelope, settings: InventarioSettings) -> None:
    repo = StockRepository(uow.connection)
    order_id = event.payload["order_id"]
    # A lock held too long fails the attempt (SQLSTATE 55P03): retried with backoff, then
    # dead-lettered, instead of holding the consumer forever. The first statement sets the
    # timeout before it takes any lock, and takes them all.
    locked = await repo.lock_for_allocation(
        event.saga_id, lock_timeout_ms=int(settings.lock_timeout_s * 1000),
        statement_timeout_ms=int(settings.statement_timeout_s * 1000))
    decision = on_payment_succeeded(locked.allocation)
    if decision is AllocationDecision.IGNORE:
        log.info("allocation skipped: saga already %s", locked.allocation,
                 extra={"saga_id": event.saga_id, "event_type": event.event_type})
        await uow.commit()
        return
    lines = locked.checked
    if lines is None:
        raise PermanentError(f"no stock validation recorded for saga {event.saga_id}")
    on_hand = locked.on_hand
    missing = shortages(lines, on_hand)
    if missing:
        uow.stage(repo.allocation(event.saga_id, order_id, AllocationStatus.FAILED, lines))
        uow.emit("FalloAsignacion", {
            "order_id": order_id,
            "reason": "race condition: stock consumed after validation",
            "unavailable": [s.as_dict() for s in missing],
        })
    else:
        uow.stage(repo.allocation(event.saga_id, order_id, AllocationStatus.ALLOCATED, lines))
        uow.emit("StockAsignado", {"order_id": order_id, "items": lines_to_json(lines)})
    await uow.commit()

