"""The messages inventario handles, as pedidos and pagos send them and as its handlers get them
(the payload parsed into its model), and handling one as the consumer does (its saga and
causation given to the events emitted meanwhile)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, TypeVar

from saga_contracts import registry
from saga_contracts.events.base import Event
from saga_contracts.events.orders import OrdenCancelada, OrdenSolicitada
from saga_contracts.events.payments import PagoExitoso
from saga_harness import sealing
from sagakit.context import current_message
from sagakit.envelope import Envelope
from sagakit.message import Message

E = TypeVar("E", bound=Event)

# Sealed for pagos as pedidos seals it; inventario never opens it, only passes it on as it came,
# so one sealed token serves every order here.
PAYMENT_METHOD = {"type": "credit_card", "token": sealing.sealed("tok_visa", sealing.charge(
    saga_id="00000000-0000-0000-0000-000000000002",
    order_id="00000000-0000-0000-0000-000000000001"))}


def _event(model: type[E], source: str, payload: dict[str, Any],
           saga_id: str | None = None) -> Message[E]:
    version = registry.latest(model.event_type).version
    registry.validate(model.event_type, version, payload)
    return Message.parse(Envelope.new(saga_id=saga_id or str(uuid.uuid4()),
                                      event_type=model.event_type, schema_version=version,
                                      source_service=source, payload=payload), model)


def orden_solicitada(*items: tuple[str, int], saga_id: str | None = None,
                     price: str = "2.50", currency: str = "EUR",
                     prices: dict[str, str] | None = None) -> Message[OrdenSolicitada]:
    """An order of ``items`` (sku, quantity), each at ``price`` unless ``prices`` gives its
    SKU another, with its total as pedidos computes it."""
    priced = [(sku, quantity, (prices or {}).get(sku, price)) for sku, quantity in items]
    total = sum((Decimal(p) * q for _, q, p in priced), Decimal("0.00"))
    return _event(OrdenSolicitada, "pedidos", {
        "order_id": str(uuid.uuid4()), "customer_id": "c-1",
        "items": [{"sku": sku, "quantity": quantity, "price": p} for sku, quantity, p in priced],
        "total_amount": f"{total:.2f}", "currency": currency,
        "shipping_address": {"street": "Calle 1", "city": "Lima", "country": "PE",
                             "postal_code": "15001"},
        "payment_method": PAYMENT_METHOD}, saga_id)


def pago_exitoso(saga_id: str, order_id: str | None = None, *, amount: str = "12.50",
                 currency: str = "EUR") -> Message[PagoExitoso]:
    """By default, the payment of ``orden_solicitada``'s order."""
    return _event(PagoExitoso, "pagos", {
        "order_id": order_id or str(uuid.uuid4()), "payment_id": str(uuid.uuid4()),
        "charge_id": "ch_1", "amount": amount, "currency": currency}, saga_id)


def orden_cancelada(saga_id: str, reason: str = "pago_rechazado",
                    order_id: str | None = None) -> Message[OrdenCancelada]:
    return _event(OrdenCancelada, "pedidos", {
        "order_id": order_id or str(uuid.uuid4()), "status": "CANCELADA", "reason": reason},
        saga_id)


@contextlib.contextmanager
def handling(event: Message[Any]) -> Iterator[None]:
    token = current_message.set(event.envelope)
    try:
        yield
    finally:
        current_message.reset(token)
