"""The events inventario publishes on ``inventory-events``, and the objects nested in them."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from saga_contracts.events.base import Event, EventPart
from saga_contracts.events.fields import (
    Amount,
    Currency,
    JsonInteger,
    Quantity,
    Sku,
    UtcTimestamp,
    Uuid,
)
from saga_contracts.events.orders import PaymentMethod


class StockLine(EventPart):
    sku: Sku
    quantity: Quantity


class PricedLine(EventPart):
    """A line as inventario verified it: its units and the catalog price it is charged at."""

    sku: Sku
    quantity: Quantity
    unit_price: Amount


class Shortage(EventPart):
    """An item with less stock than the order asks for."""

    sku: Sku
    requested: Annotated[int, JsonInteger(minimum=1)]
    available: Annotated[int, JsonInteger(minimum=0)]


AllocationStrategyRun = Literal["check_then_pay", "reserve_then_pay"]


class StockVerificado(Event):
    """Every item had enough stock, beside what other sagas hold reserved. Every item was
    priced by inventario's catalog at exactly the order's price and currency. Carries what
    pagos charges (``total_amount``, computed by inventario from the catalog), and the payment
    token as pedidos sealed it. From 4.1.0, which allocation strategy ran: ``check_then_pay``
    (read without locks, nothing held) or ``reserve_then_pay`` (the units held for the saga
    until ``reserved_until``)."""

    event_type: ClassVar[str] = "StockVerificado"

    order_id: Uuid
    items: Annotated[tuple[PricedLine, ...], Field(min_length=1)]
    total_amount: Amount
    currency: Currency
    payment_method: PaymentMethod
    allocation_strategy: AllocationStrategyRun | None = None
    reserved_until: UtcTimestamp | None = None

    @field_validator("allocation_strategy", "reserved_until", mode="before")
    @classmethod
    def _absent_rather_than_null(cls, value: Any) -> Any:
        # The schema lets these be absent (a producer before 4.1.0, or nothing reserved),
        # never null.
        if value is None:
            raise ValueError("left out when there is none, never null")
        return value


class StockNoDisponible(Event):
    """At least one item lacked stock at validation; the saga ends without a charge."""

    event_type: ClassVar[str] = "StockNoDisponible"

    order_id: Uuid
    reason: str
    unavailable: Annotated[tuple[Shortage, ...], Field(min_length=1)]


PriceProblem = Literal["sin_precio", "moneda_distinta", "precio_distinto"]
"""PrecioRechazado's problem codes (its first MAJOR), in Spanish."""

PriceProblem_v2 = Literal["not_priced", "other_currency", "other_price"]
"""PrecioRechazado_v2's: the same three, in English, as the codes the project adds are."""


class _RefusedLineFields(EventPart):
    sku: Sku
    price: Amount
    currency: Currency
    catalog_price: Amount | None = None
    catalog_currency: Currency | None = None

    @field_validator("catalog_price", "catalog_currency", mode="before")
    @classmethod
    def _absent_rather_than_null(cls, value: Any) -> Any:
        # The schema lets these be absent, never null: a product without a price leaves
        # them out (None, the default, is never validated).
        if value is None:
            raise ValueError("left out when the product has no catalog price, never null")
        return value


class RefusedLine(_RefusedLineFields):
    """An order item whose price is not its product's catalog price."""

    problem: PriceProblem


class RefusedLine_v2(_RefusedLineFields):
    """The same, its problem in PrecioRechazado_v2's codes."""

    problem: PriceProblem_v2


class PrecioRechazado(Event):
    """Every item had enough stock, but some item's price or currency is not its catalog price
    (or the product has none): the saga ends without a charge."""

    event_type: ClassVar[str] = "PrecioRechazado"

    order_id: Uuid
    reason: str
    refused: Annotated[tuple[RefusedLine, ...], Field(min_length=1)]


class PrecioRechazado_v2(Event):
    """PrecioRechazado's second MAJOR, an event type of its own (the standard's suffix): its
    problem codes in English. Published beside PrecioRechazado while its consumers move
    (docs/operations.md#evolving-an-event-schema)."""

    event_type: ClassVar[str] = "PrecioRechazado_v2"

    order_id: Uuid
    reason: str
    refused: Annotated[tuple[RefusedLine_v2, ...], Field(min_length=1)]


PriceRefusal = PrecioRechazado | PrecioRechazado_v2
"""The event that refuses an order's prices, in either version published during the
transition."""


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


MODELS: tuple[type[Event], ...] = (StockVerificado, StockNoDisponible, PrecioRechazado,
                                   PrecioRechazado_v2, StockAsignado, FalloAsignacion,
                                   StockLiberado)
