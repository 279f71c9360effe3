"""OrdenSolicitada → StockVerificado | StockNoDisponible. Reads without locks; changes no stock.

The check is recorded for the allocation to know, later, what the saga asked for. A saga that
has an allocation already was cancelled before it was checked: nothing is left to check.
"""

from __future__ import annotations

import logging

from inventario.domain.stock import Line, merge_lines, shortages
from inventario.usecases.ports import StockStore
from sagakit.envelope import Envelope
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("inventario.validate_stock")


async def validate_stock(uow: UnitOfWorkPort, stock: StockStore, event: Envelope) -> None:
    p = event.payload
    lines = merge_lines(Line(i["sku"], int(i["quantity"])) for i in p["items"])
    allocation, on_hand = await stock.validation_read(event.saga_id,
                                                      [line.sku for line in lines])
    if allocation is not None:
        # Cancelled before we validated it: nothing to check any more.
        log.info("order already cancelled, validation skipped",
                 extra={"saga_id": event.saga_id, "event_type": event.event_type})
        await uow.commit()
        return
    missing = shortages(lines, on_hand)
    if missing:
        stock.record_check(event.saga_id, p["order_id"], lines, "unavailable")
        uow.emit("StockNoDisponible", {
            "order_id": p["order_id"],
            "reason": "stock insuficiente",
            "unavailable": [s.as_dict() for s in missing],
        })
    else:
        stock.record_check(event.saga_id, p["order_id"], lines, "verified")
        uow.emit("StockVerificado", {
            "order_id": p["order_id"],
            "items": [line.as_dict() for line in lines],
            "total_amount": p["total_amount"],
            "currency": p["currency"],
            "payment_method": p["payment_method"],
        })
    await uow.commit()
