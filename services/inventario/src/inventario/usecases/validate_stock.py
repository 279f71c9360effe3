"""OrdenSolicitada → StockVerificado | StockNoDisponible. Reads without locks; changes no stock.

The read runs outside any transaction (it takes no lock, and under READ COMMITTED a read inside
one would see no more than this) and the record of the check goes with the commit statement:
two round trips, where BEGIN, read, write, commit statement and COMMIT took five."""

from __future__ import annotations

import logging

from sagakit.envelope import Envelope
from sagakit.store.unit_of_work import UnitOfWork

from inventario.adapters.stock_repository import StockRepository, lines_to_json
from inventario.domain.stock import Line, merge_lines, shortages

log = logging.getLogger("inventario.validate_stock")


async def on_orden_solicitada(uow: UnitOfWork, event: Envelope) -> None:
    p = event.payload
    repo = StockRepository(uow.connection)
    lines = merge_lines(Line(i["sku"], int(i["quantity"])) for i in p["items"])
    allocation, on_hand = await repo.validation_read(event.saga_id,
                                                     [line.sku for line in lines])
    if allocation is not None:
        # Cancelled before we validated it: nothing to check any more.
        log.info("order already cancelled, validation skipped",
                 extra={"saga_id": event.saga_id, "event_type": event.event_type})
        await uow.commit()
        return
    missing = shortages(lines, on_hand)
    if missing:
        uow.stage(repo.stock_check(event.saga_id, p["order_id"], lines, "unavailable"))
        uow.emit("StockNoDisponible", {
            "order_id": p["order_id"],
            "reason": "stock insuficiente",
            "unavailable": [s.as_dict() for s in missing],
        })
    else:
        uow.stage(repo.stock_check(event.saga_id, p["order_id"], lines, "verified"))
        uow.emit("StockVerificado", {
            "order_id": p["order_id"],
            "items": lines_to_json(lines),
            "total_amount": p["total_amount"],
            "currency": p["currency"],
            "payment_method": p["payment_method"],
        })
    await uow.commit()

