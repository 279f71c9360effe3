"""The events pedidos publishes on ``order-events``, and the objects nested in them."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints

from saga_contracts.events.base import Event, EventPart
from saga_contracts.events.fields import (
    Amount,
    Currency,
    JsonInteger,
    Quantity,
    SealedToken,
    Sku,
    Uuid,
)

Text200 = Annotated[str, StringConstraints(min_length=1, max_length=200)]
CancellationReason = Literal["stock_insuficiente", "pago_rechazado", "fallo_asignacion",
                             "cancelada_por_usuario", "timeout", "saga_expirada",
                             "precio_rechazado"]
TimedOutStep = Literal["validacion", "pago", "asignacion"]
ElapsedMs = Annotated[int, JsonInteger(minimum=0)]


class OrderLine(EventPart):
    sku: Sku
    quantity: Quantity
    price: Amount


class ShippingAddress(EventPart):
    street: Text200
    city: Text200
    country: Text200
    postal_code: Text200


class ShippingAddressInLines(EventPart):
    """OrdenSolicitada_v4's address: what comes before the city in one to three lines."""

    lines: Annotated[tuple[Text200, ...], Field(min_length=1, max_length=3)]
    city: Text200
    country: Text200
    postal_code: Text200


class PaymentMethod(EventPart):
    """How the order is paid: the payment token sealed for pagos, which alone can open it."""

    type: Literal["credit_card"]
    # Kept out of repr() although sealed: a model that reaches a log line carries no token.
    token: Annotated[SealedToken, Field(repr=False)]


class OrdenSolicitada(Event):
    """An order was placed; the saga starts."""

    event_type: ClassVar[str] = "OrdenSolicitada"

    order_id: Uuid
    customer_id: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    items: Annotated[tuple[OrderLine, ...], Field(min_length=1, max_length=50)]
    total_amount: Amount
    currency: Currency
    shipping_address: Annotated[ShippingAddress, Field(repr=False)]
    payment_method: PaymentMethod


class OrdenSolicitada_v4(Event):
    """An order was placed; the saga starts. OrdenSolicitada's fourth MAJOR, an event type of its
    own (the standard's suffix): the address in lines. Published beside OrdenSolicitada while
    its consumers move (docs/operations.md#evolving-an-event-schema)."""

    event_type: ClassVar[str] = "OrdenSolicitada_v4"

    order_id: Uuid
    customer_id: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    items: Annotated[tuple[OrderLine, ...], Field(min_length=1, max_length=50)]
    total_amount: Amount
    currency: Currency
    shipping_address: Annotated[ShippingAddressInLines, Field(repr=False)]
    payment_method: PaymentMethod


OrderRequest = OrdenSolicitada | OrdenSolicitada_v4
"""The event that starts a saga, in either version published during the transition."""


class OrdenCompletada(Event):
    """The saga ended successfully."""

    event_type: ClassVar[str] = "OrdenCompletada"

    order_id: Uuid
    total_amount: Amount
    currency: Currency


class OrdenCancelada(Event):
    """The saga ended without the order; participants compensate what they did for it."""

    event_type: ClassVar[str] = "OrdenCancelada"

    order_id: Uuid
    status: str
    reason: CancellationReason


class StepTimedOut(Event):
    """A step's deadline passed before its answer arrived."""

    event_type: ClassVar[str] = "StepTimedOut"

    order_id: Uuid
    step: TimedOutStep
    elapsed_ms: ElapsedMs


class SagaExpirada(Event):
    """The saga passed its overall deadline; every confirmed step is compensated and the order
    is TIMED_OUT."""

    event_type: ClassVar[str] = "SagaExpirada"

    order_id: Uuid
    previous_status: str
    elapsed_ms: ElapsedMs


MODELS: tuple[type[Event], ...] = (OrdenSolicitada, OrdenSolicitada_v4, OrdenCompletada,
                                   OrdenCancelada, StepTimedOut, SagaExpirada)
