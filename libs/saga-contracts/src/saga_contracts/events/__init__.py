"""Typed event payloads: one frozen pydantic model per event type, named as the event type and
mirroring its latest schema (a test fails when a model drifts from it).

A handler gets its event's payload as a model (the consumer parses it, ``sagakit.message``)
and emits models::

    async def on_orden_solicitada(uow: UnitOfWork, event: Message[OrdenSolicitada]) -> None:
        order = event.payload                                # an OrdenSolicitada
        uow.emit(StockVerificado(order_id=order.order_id, ...))

Elsewhere ``parse`` reads a payload by its event type (``parse("OrdenSolicitada", payload)``)
and ``to_payload`` writes a model back as JSON-ready values.

The models live by producer: ``orders`` (pedidos), ``inventory`` (inventario), ``payments``
(pagos). Field types (``fields``) follow the schema: uuid strings stay ``str`` and come back
unchanged; amounts are ``Decimal`` written back as two-place strings (a float is refused);
enums are ``Literal``; integers refuse bools and numeric strings. Fields a newer MINOR version
adds are dropped on parse, and nested objects refuse unknown fields, as their schemas do.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import ValidationError

from saga_contracts import registry
from saga_contracts.events import inventory, orders, payments
from saga_contracts.events.base import Event

E = TypeVar("E", bound=Event)

EVENT_MODELS: Mapping[str, type[Event]] = MappingProxyType({
    model.event_type: model for model in (*orders.MODELS, *inventory.MODELS, *payments.MODELS)})


def parse(event_type: str, payload: Any) -> Event:
    """The model of ``payload``. Raises ``registry.UnknownEventType`` for an event type without
    a model and ``registry.SchemaViolation`` for a payload the model refuses."""
    model = EVENT_MODELS.get(event_type)
    if model is None:
        raise registry.UnknownEventType(event_type)
    return parse_as(model, payload)


def parse_as(model: type[E], payload: Any) -> E:
    """``payload`` as an instance of ``model``. Raises ``registry.SchemaViolation`` (against the
    latest schema of its event type) for a payload the model refuses."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        event_type = model.event_type
        raise registry.SchemaViolation(event_type, registry.latest(event_type).version, [
            f"{'/'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in exc.errors(include_url=False)]) from exc
