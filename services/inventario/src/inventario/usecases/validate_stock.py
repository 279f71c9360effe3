"""OrdenSolicitada → StockVerificado | StockNoDisponible. Reads without locks; changes no stock.

The check is recorded for the allocation to know, later, what the saga asked for: its lines,
and the payment a verified check asks pagos for (the order's total, in StockVerificado, which
goes out with the same commit: pagos charges only after it, so the record is there before any
genuine PagoExitoso). A saga that has an allocation already was cancelled before it was
checked: nothing is left to check.
"""

from __future__ import annotations

import logging

from inventario.domain.payment_match import Money
from inventario.domain.stock import Line, merge_lines, shortages
from inventario.usecases.event_parts import shortage_parts, stock_lines
from inventario.usecases.ports import StockStore
from saga_contracts.events.inventory import StockNoDisponible, StockVerificado
from saga_contracts.events.orders import OrdenSolicitada
from sagakit.message import Message
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("inventario.validate_stock")


async def validate_stock(uow: UnitOfWorkPort, stock: StockStore,
                         event: Message[OrdenSolicitada]) -> None:
    order = event.payload
    lines = merge_lines(Line(i.sku, i.quantity) for i in order.items)
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
        stock.record_check(event.saga_id, order.order_id, lines, "unavailable",
                           payment_requested=None)
        uow.emit(StockNoDisponible(order_id=order.order_id, reason="stock insuficiente",
                                   unavailable=shortage_parts(missing)))
    else:
        stock.record_check(event.saga_id, order.order_id, lines, "verified",
                           payment_requested=Money(order.total_amount, order.currency))
        uow.emit(StockVerificado(order_id=order.order_id, items=stock_lines(lines),
                                 total_amount=order.total_amount, currency=order.currency,
                                 payment_method=order.payment_method))
    await uow.commit()
