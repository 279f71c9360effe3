"""The events pagos publishes on ``payment-events``."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import StringConstraints

from saga_contracts.events.base import Event
from saga_contracts.events.fields import Amount, Currency, JsonInteger, Uuid

NonEmpty = Annotated[str, StringConstraints(min_length=1)]


class PagoExitoso(Event):
    """The gateway captured the charge."""

    event_type: ClassVar[str] = "PagoExitoso"

    order_id: Uuid
    payment_id: Uuid
    charge_id: NonEmpty
    amount: Amount
    currency: Currency


class PagoRechazado(Event):
    """The gateway declined the charge, or pagos gave up on it."""

    event_type: ClassVar[str] = "PagoRechazado"

    order_id: Uuid
    payment_id: Uuid
    decline_code: NonEmpty
    reason: str


class ReembolsoEjecutado(Event):
    """The charge was refunded in full."""

    event_type: ClassVar[str] = "ReembolsoEjecutado"

    order_id: Uuid
    payment_id: Uuid
    refund_id: NonEmpty
    amount: Amount
    currency: Currency


class FalloReembolso(Event):
    """The refund kept failing; the payment is marked for manual refund."""

    event_type: ClassVar[str] = "FalloReembolso"

    order_id: Uuid
    payment_id: Uuid
    reason: str
    attempts: Annotated[int, JsonInteger(minimum=1)]


MODELS: tuple[type[Event], ...] = (PagoExitoso, PagoRechazado, ReembolsoEjecutado,
                                   FalloReembolso)
