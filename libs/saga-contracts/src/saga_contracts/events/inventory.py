"""The events inventario publishes on ``inventory-events``, and the objects nested in them."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from saga_contracts.events.base import Event, EventPart
from saga_contracts.events.fields import Amount, Currency, JsonInteger, Quantity, Sku, Uuid
from saga_contracts.events.orders import PaymentMethod


class StockLine(EventPart):
    sku: Sku
    quantity: Quantity


class Shortage(EventPart):
    """An item with less stock than the order asks for."""

    sku: Sku
    requested: Annotated[int, JsonInteger(minimum=1)]
    available: Annotated[int, JsonInteger(minimum=0)]


class StockVerificado(Event):
    """Every item had enough stock when read, without locks; nothing was reserved. Carries what
    pagos needs to charge, the payment token as pedidos sealed it."""

    event_type: ClassVar[str] = "StockVerificado"

    order_id: Uuid
    items: Annotated[tuple[StockLine, ...], Field(min_length=1)]
    total_amount: Amount
    currency: Currency
    payment_method: PaymentMethod


class StockNoDisponible(Event):
    """At least one item lacked stock at validation; the saga ends without a charge."""

    event_type: ClassVar[str] = "StockNoDisponible"

    order_id: Uuid
    reason: str
    unavailable: Annotated[tuple[Shortage, ...], Field(min_length=1)]


class StockAsignado(Event):
    """Stock was decremented under a row lock for every item."""

    event_type: ClassVar[str] = "StockAsignado"

    order_id: Uuid
    items: Annotated[tuple[StockLine, ...], Field(min_length=1)]


class FalloAsignacion(Event):
    """Allocation found too little stock after payment (a race lost); nothing was
    decremented."""

    event_type: ClassVar[str] = "FalloAsignacion"

    order_id: Uuid
    reason: str
    unavailable: tuple[Shortage, ...]


class StockLiberado(Event):
    """Allocated stock was put back (compensation)."""

    event_type: ClassVar[str] = "StockLiberado"

    order_id: Uuid
    items: tuple[StockLine, ...]


MODELS: tuple[type[Event], ...] = (StockVerificado, StockNoDisponible, StockAsignado,
                                   FalloAsignacion, StockLiberado)
