"""PagoExitoso → StockAsignado | FalloAsignacion: the units taken, once per saga.

The use case decides on what it reads without locks (the lines checked for the saga, its
allocation, the units on hand) and records the allocation with the commit, guarded: when the
units, locked at the commit, no longer agree with the decision (another saga took the last unit
between the read and the lock), or the saga's allocation was recorded meanwhile, nothing is
written, ``commit`` returns False and the consumer handles the message again at once, on what
it reads then: a FalloAsignacion, and the saga's refund. How the read and the guarded write
reach PostgreSQL in two round trips: inventario.adapters.stock_repository (ADR 0005).
"""

from __future__ import annotations

import logging

from inventario.domain.stock import (
    AllocationDecision,
    AllocationStatus,
    on_payment_succeeded,
    shortages,
)
from inventario.usecases.event_parts import shortage_parts, stock_lines
from inventario.usecases.ports import StockStore
from saga_contracts.events.inventory import FalloAsignacion, StockAsignado
from saga_contracts.events.payments import PagoExitoso
from sagakit.errors import PermanentError
from sagakit.message import Message
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("inventario.allocate_stock")


async def allocate_stock(uow: UnitOfWorkPort, stock: StockStore, event: Message[PagoExitoso],
                         *, lock_timeout_ms: int) -> None:
    """``lock_timeout_ms``: how long the allocation may wait for a product another saga holds;
    past it the attempt fails (a transient error: retried with backoff, then dead-lettered)
    instead of holding the consumer forever."""
    order_id = event.payload.order_id
    state = await stock.allocation_state(event.saga_id)
    decision = on_payment_succeeded(state.allocation)
    if decision is AllocationDecision.IGNORE:
        log.info("allocation skipped: saga already %s", state.allocation,
                 extra={"saga_id": event.saga_id, "event_type": event.event_type})
        await uow.commit()
        return
    lines = state.checked
    if lines is None:
        raise PermanentError(f"no stock validation recorded for saga {event.saga_id}")
    missing = shortages(lines, state.on_hand)
    status = AllocationStatus.FAILED if missing else AllocationStatus.ALLOCATED
    stock.record_allocation(event.saga_id, order_id, status, lines,
                            lock_timeout_ms=lock_timeout_ms)
    if missing:
        uow.emit(FalloAsignacion(order_id=order_id,
                                 reason="race condition: stock consumed after validation",
                                 unavailable=shortage_parts(missing)))
    else:
        uow.emit(StockAsignado(order_id=order_id, items=stock_lines(lines)))
    # False (nothing written) when the locked units disagree with the decision: the consumer
    # handles the message again (sagakit.consumer, StaleRead).
    await uow.commit()
