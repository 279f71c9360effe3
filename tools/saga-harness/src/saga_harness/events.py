"""The participants' events as a handler gets them (``sagakit.message.Message``), with payloads
their schemas accept, for tests that hand an event to a handler without the consumer."""

from __future__ import annotations

import uuid
from typing import Any

from saga_contracts import registry
from saga_contracts.events import EVENT_MODELS
from saga_harness import sealing
from sagakit.envelope import Envelope
from sagakit.message import Message

_ITEMS = [{"sku": "SKU-1", "quantity": 1}]
_PRICED = [{"sku": "SKU-1", "quantity": 1, "unit_price": "10.00"}]
_SHORT = [{"sku": "SKU-1", "requested": 1, "available": 0}]


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


def message(event_type: str, saga_id: str, payload: dict[str, Any],
            source: str = "test") -> Message[Any]:
    """The event as the consumer hands it to its handler: its payload parsed into its model."""
    envelope = Envelope.new(saga_id=saga_id, event_type=event_type,
                            schema_version=registry.latest(event_type).version,
                            source_service=source, payload=payload)
    return Message.parse(envelope, EVENT_MODELS[event_type])
