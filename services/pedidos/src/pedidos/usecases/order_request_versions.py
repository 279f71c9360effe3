"""OrdenSolicitada in the versions pedidos publishes (``PEDIDOS_PUBLISHES_ORDEN_SOLICITADA``):
``OrdenSolicitada`` (MAJOR 3, the address's street one field) and ``OrdenSolicitada_v4`` (the
address in lines), side by side while their consumers move from one to the other
(docs/operations.md#evolving-an-event-schema).

One order, written in either version: the street is the address's first line, and lines
written as one street are joined with a comma. Both carry the same sealed payment token, bound
to the same saga and charge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from saga_contracts.events.orders import (
    OrdenSolicitada,
    OrdenSolicitada_v4,
    OrderRequest,
    ShippingAddress,
    ShippingAddressInLines,
)

MODELS: dict[str, type[OrdenSolicitada] | type[OrdenSolicitada_v4]] = {
    OrdenSolicitada.event_type: OrdenSolicitada,
    OrdenSolicitada_v4.event_type: OrdenSolicitada_v4,
}
"""The versions of the event, by event type, oldest first."""


def as_version(request: OrderRequest, event_type: str) -> OrderRequest:
    """``request`` written as ``event_type`` (one of ``MODELS``)."""
    if request.event_type == event_type:
        return request
    fields: dict[str, Any] = request.model_dump()
    address = request.shipping_address
    if isinstance(address, ShippingAddress):
        fields["shipping_address"] = ShippingAddressInLines(
            lines=(address.street,), city=address.city, country=address.country,
            postal_code=address.postal_code)
    else:
        fields["shipping_address"] = ShippingAddress(
            street=", ".join(address.lines), city=address.city, country=address.country,
            postal_code=address.postal_code)
    return MODELS[event_type].model_validate(fields)


def in_versions(request: OrderRequest, event_types: Sequence[str]) -> list[OrderRequest]:
    """``request`` in each of ``event_types``, in that order."""
    return [as_version(request, event_type) for event_type in event_types]


def parse_stored(payload: dict[str, Any]) -> OrderRequest:
    """A payload pedidos emitted in either version, as its model; ``ValueError`` if neither
    reads it (the address tells them apart: each version's refuses the other's fields)."""
    errors: list[str] = []
    for model in MODELS.values():
        try:
            return model.model_validate(payload)
        except ValidationError as exc:
            errors.append(f"{model.event_type}: {exc.error_count()} errors")
    raise ValueError("; ".join(errors))
