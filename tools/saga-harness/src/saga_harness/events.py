"""Every event message the tests hand to a handler without the consumer: the envelope as its
sender builds it and its payload parsed into its model (``sagakit.message.Message``), with
payloads their schemas accept. The one place tests build events: the services' unit tests, the
harness' in-process runs (``saga_harness.payments``) and the integration tests all take theirs
from here.

- ``event``: any event, from its model, sender and payload; ``message``: the same by type name.
- ``payload_of``: a payload of an event pagos or inventario emits, for tests that change one
  field.
- The events of a saga by name (``orden_solicitada``, ``stock_verificado``, ``pago_exitoso``,
  ``stock_asignado``, ``fallo_asignacion``, ``orden_cancelada``), each checked against its
  schema.
- ``handling``: a handler's code run as the consumer runs it, with the message it handles as
  the current one (the events it emits take their saga and causation from it).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, TypeVar

from saga_contracts import registry
from saga_contracts.events import EVENT_MODELS
from saga_contracts.events.base import Event
from saga_contracts.events.inventory import FalloAsignacion, StockAsignado, StockVerificado
from saga_contracts.events.orders import OrdenCancelada, OrdenSolicitada, OrdenSolicitada_v4
from saga_contracts.events.payments import PagoExitoso
from saga_contracts.sealing import Binding
from saga_harness import sealing
from sagakit.context import current_message
from sagakit.envelope import Envelope
from sagakit.message import Message

E = TypeVar("E", bound=Event)

_ITEMS = [{"sku": "SKU-1", "quantity": 1}]
_PRICED = [{"sku": "SKU-1", "quantity": 1, "unit_price": "10.00"}]
_SHORT = [{"sku": "SKU-1", "requested": 1, "available": 0}]

# Sealed for pagos as pedidos seals it, for a charge of a saga of its own: inventario never
# opens it, only passes it on as it came, so one sealed token serves every order there.
PAYMENT_METHOD = {"type": "credit_card", "token": sealing.sealed("tok_visa", sealing.charge(
    saga_id="00000000-0000-0000-0000-000000000002",
    order_id="00000000-0000-0000-0000-000000000001"))}


def event(model: type[E], saga_id: str | None, source: str, payload: dict[str, Any], *,
          metadata: dict[str, Any] | None = None, replayed: bool = False,
          checked: bool = False) -> Message[E]:
    """``model``'s event from ``source`` for the saga (a new one if None), as its handler gets
    it; ``replayed``: as the consumer marks a replay the operator signed for the service;
    ``checked``: the payload validated against the event's latest schema first."""
    version = registry.latest(model.event_type).version
    if checked:
        registry.validate(model.event_type, version, payload)
    return Message.parse(Envelope.new(saga_id=saga_id or str(uuid.uuid4()),
                                      event_type=model.event_type, schema_version=version,
                                      source_service=source, payload=payload,
                                      metadata=metadata), model, replayed=replayed)


def message(event_type: str, saga_id: str, payload: dict[str, Any],
            source: str = "test") -> Message[Any]:
    """The event of type ``event_type`` as the consumer hands it to its handler."""
    return event(EVENT_MODELS[event_type], saga_id, source, payload)


def payload_of(event_type: str, order_id: str, **fields: Any) -> dict[str, Any]:
    """A payload of ``event_type`` (one that pagos or inventario emits) for ``order_id``,
    ``fields`` replacing its defaults; a payment token is sealed with the test key
    (``saga_harness.sealing``), for a charge of a saga of its own: no test that takes its
    payload from here opens it."""
    payment_id = str(uuid.uuid4())
    payment_method = {"type": "credit_card", "token": sealing.sealed(
        "tok_visa", sealing.charge(saga_id=str(uuid.uuid4()), order_id=order_id))}
    defaults: dict[str, dict[str, Any]] = {
        "StockVerificado": {"items": _PRICED, "total_amount": "10.00", "currency": "USD",
                            "payment_method": payment_method},
        "StockNoDisponible": {"reason": "stock insuficiente", "unavailable": _SHORT},
        "PrecioRechazado": {"reason": "precio distinto del catálogo", "refused": [
            {"sku": "SKU-1", "problem": "precio_distinto", "price": "0.01", "currency": "USD",
             "catalog_price": "10.00", "catalog_currency": "USD"}]},
        "PrecioRechazado_v2": {"reason": "not the catalog's price", "refused": [
            {"sku": "SKU-1", "problem": "other_price", "price": "0.01", "currency": "USD",
             "catalog_price": "10.00", "catalog_currency": "USD"}]},
        "StockAsignado": {"items": _ITEMS},
        "FalloAsignacion": {"reason": "stock consumed after validation",
                            "unavailable": _SHORT},
        "StockLiberado": {"items": _ITEMS},
        "PagoExitoso": {"payment_id": payment_id, "charge_id": "ch_1", "amount": "10.00",
                        "currency": "USD"},
        "PagoRechazado": {"payment_id": payment_id, "decline_code": "card_declined",
                          "reason": "declined"},
        "ReembolsoEjecutado": {"payment_id": payment_id, "refund_id": "re_1",
                               "amount": "10.00", "currency": "USD"},
        "FalloReembolso": {"payment_id": payment_id, "reason": "refund failed",
                           "attempts": 3},
    }
    return {"order_id": order_id, **defaults[event_type], **fields}


# ---- pedidos' events

def orden_solicitada(*items: tuple[str, int], saga_id: str | None = None,
                     order_id: str | None = None, customer_id: str = "c-1",
                     price: str = "2.50", currency: str = "EUR",
                     prices: dict[str, str] | None = None,
                     payment_method: dict[str, Any] | None = None
                     ) -> Message[OrdenSolicitada]:
    """An order of ``items`` (sku, quantity), each at ``price`` unless ``prices`` gives its
    SKU another, with its total as pedidos computes it; paid with ``PAYMENT_METHOD`` unless
    ``payment_method`` is given."""
    priced = [(sku, quantity, (prices or {}).get(sku, price)) for sku, quantity in items]
    total = sum((Decimal(p) * q for _, q, p in priced), Decimal("0.00"))
    return event(OrdenSolicitada, saga_id, "pedidos", {
        "order_id": order_id or str(uuid.uuid4()), "customer_id": customer_id,
        "items": [{"sku": sku, "quantity": quantity, "price": p} for sku, quantity, p in priced],
        "total_amount": f"{total:.2f}", "currency": currency,
        "shipping_address": {"street": "Calle 1", "city": "Lima", "country": "PE",
                             "postal_code": "15001"},
        "payment_method": payment_method or PAYMENT_METHOD}, checked=True)


def orden_solicitada_v4(*items: tuple[str, int], saga_id: str | None = None,
                        **order: Any) -> Message[OrdenSolicitada_v4]:
    """``orden_solicitada`` as OrdenSolicitada_v4: the address in lines."""
    v3 = orden_solicitada(*items, saga_id=saga_id, **order)
    address = v3.envelope.payload["shipping_address"]
    return event(OrdenSolicitada_v4, v3.saga_id, "pedidos", {
        **v3.envelope.payload, "shipping_address": {
            "lines": [address["street"]], "city": address["city"],
            "country": address["country"], "postal_code": address["postal_code"]}},
        checked=True)


def orden_cancelada(saga_id: str, order_id: str | None = None, *,
                    reason: str = "cancelada_por_usuario",
                    status: str = "CANCELADA_POR_USUARIO",
                    customer: str | None = None) -> Message[OrdenCancelada]:
    """The saga cancelled (``reason``), ``customer`` the envelope's ``metadata.user_id`` (None:
    it names none)."""
    return event(OrdenCancelada, saga_id, "pedidos", {
        "order_id": order_id or str(uuid.uuid4()), "status": status, "reason": reason},
        metadata={"user_id": customer} if customer is not None else None, checked=True)


# ---- inventario's events

def stock_verificado(saga_id: str, order_id: str | None = None, *, token: str = "tok_visa",
                     unit_price: str = "9.99", quantity: int = 2, currency: str = "USD",
                     customer: str | None = sealing.TEST_CUSTOMER,
                     sealed_for: Binding | None = None, replay_of: str | None = None,
                     signed_replay: bool | None = None) -> Message[StockVerificado]:
    """``quantity`` units at ``unit_price``, inventario's amount to charge their total (19.98
    USD by default); ``customer``: the envelope's ``metadata.user_id`` (None: the event names
    none). ``token`` in the clear, sealed with the test key (``saga_harness.sealing``) as
    pedidos seals it: for this event's charge, its customer the one named (the tests' own if
    none is), unless ``sealed_for`` names another; the workers of the tests' keys open it.
    ``replay_of``: a replay of that message, as ``sagactl replay`` marks it, signed by the
    operator for pagos unless ``signed_replay`` is False (the envelope's word alone)."""
    order_id = order_id or str(uuid.uuid4())
    metadata = {**({"replay_of": replay_of} if replay_of is not None else {}),
                **({"user_id": customer} if customer is not None else {})}
    total = Decimal(unit_price) * quantity
    charge = sealed_for or sealing.charge(
        saga_id=saga_id, order_id=order_id, amount=total, currency=currency,
        customer_id=customer or sealing.TEST_CUSTOMER)
    return event(StockVerificado, saga_id, "inventario", {
        "order_id": order_id, "total_amount": f"{total:.2f}", "currency": currency,
        "items": [{"sku": "SKU-1", "quantity": quantity, "unit_price": unit_price}],
        "payment_method": {"type": "credit_card", "token": sealing.sealed(token, charge)}},
        metadata=metadata or None,
        replayed=replay_of is not None if signed_replay is None else signed_replay,
        checked=True)


def stock_asignado(saga_id: str, order_id: str, *, quantity: int = 2
                   ) -> Message[StockAsignado]:
    return event(StockAsignado, saga_id, "inventario", {
        "order_id": order_id, "items": [{"sku": "SKU-1", "quantity": quantity}]}, checked=True)


def fallo_asignacion(saga_id: str, order_id: str, *, quantity: int = 2
                     ) -> Message[FalloAsignacion]:
    return event(FalloAsignacion, saga_id, "inventario", {
        "order_id": order_id, "reason": "stock_agotado",
        "unavailable": [{"sku": "SKU-1", "requested": quantity, "available": 0}]},
        checked=True)


# ---- pagos' events

def pago_exitoso(saga_id: str, order_id: str | None = None, *, amount: str = "12.50",
                 currency: str = "EUR") -> Message[PagoExitoso]:
    """By default, the payment of ``orden_solicitada``'s order of five units."""
    return event(PagoExitoso, saga_id, "pagos", {
        "order_id": order_id or str(uuid.uuid4()), "payment_id": str(uuid.uuid4()),
        "charge_id": "ch_1", "amount": amount, "currency": currency}, checked=True)


@contextlib.contextmanager
def handling(received: Message[Any]) -> Iterator[None]:
    """Runs the block as the consumer runs a handler of ``received``: its envelope the current
    message."""
    token = current_message.set(received.envelope)
    try:
        yield
    finally:
        current_message.reset(token)
