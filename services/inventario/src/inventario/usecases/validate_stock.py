"""OrdenSolicitada → StockVerificado | StockNoDisponible | PrecioRechazado. Reads without locks;
changes no stock.

Stock first: an order short of units is StockNoDisponible whatever its prices. Then prices
(``inventario.domain.pricing``): an item whose product has no catalog price, or one in
another currency or at another price than the order's, refuses the order (PrecioRechazado)
and nothing is charged. A verified order asks pagos for its lines at their catalog prices,
computed here: that is what StockVerificado carries and pagos charges, never a figure of the
order's own.

The check is recorded for the allocation to know, later, what the saga asked for: its lines,
and the payment a verified check asks pagos for (the amount in StockVerificado, which goes
out with the same commit: pagos charges only after it, so the record is there before any
genuine PagoExitoso). A saga that has an allocation already was cancelled before it was
checked: nothing is left to check.
"""

from __future__ import annotations

import logging

from inventario.domain.payment_match import Money
from inventario.domain.pricing import OrderedItem, amount_to_charge, refused_items
from inventario.domain.stock import Line, merge_lines, shortages
from inventario.usecases.event_parts import priced_lines, refused_parts, shortage_parts
from inventario.usecases.ports import StockStore
from saga_contracts.events.inventory import PrecioRechazado, StockNoDisponible, StockVerificado
from saga_contracts.events.orders import OrdenSolicitada
from sagakit.message import Message
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("inventario.validate_stock")


async def validate_stock(uow: UnitOfWorkPort, stock: StockStore,
                         event: Message[OrdenSolicitada]) -> None:
    order = event.payload
    lines = merge_lines(Line(i.sku, i.quantity) for i in order.items)
    read = await stock.validation_read(event.saga_id, [line.sku for line in lines])
    if read.allocation is not None:
        # Cancelled before we validated it: nothing to check any more.
        log.info("order already cancelled, validation skipped",
                 extra={"saga_id": event.saga_id, "event_type": event.event_type})
        await uow.commit()
        return
    missing = shortages(lines, read.on_hand)
    refused = [] if missing else refused_items(
        (OrderedItem(i.sku, i.quantity, i.price) for i in order.items), order.currency,
        read.prices)
    if missing:
        stock.record_check(event.saga_id, order.order_id, lines, "unavailable",
                           payment_requested=None)
        uow.emit(StockNoDisponible(order_id=order.order_id, reason="stock insuficiente",
                                   unavailable=shortage_parts(missing)))
    elif refused:
        stock.record_check(event.saga_id, order.order_id, lines, "price_refused",
                           payment_requested=None)
        uow.emit(PrecioRechazado(order_id=order.order_id,
                                 reason="precio distinto del catálogo",
                                 refused=refused_parts(refused, order.currency)))
    else:
        charged = Money(amount_to_charge(lines, read.prices), order.currency)
        stock.record_check(event.saga_id, order.order_id, lines, "verified",
                           payment_requested=charged)
        uow.emit(StockVerificado(order_id=order.order_id, items=priced_lines(lines, read.prices),
                                 total_amount=charged.amount, currency=charged.currency,
                                 payment_method=order.payment_method))
    await uow.commit()
