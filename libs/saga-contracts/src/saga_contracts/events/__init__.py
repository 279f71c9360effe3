"""Typed event payloads: one frozen pydantic model per event type, named as the event type and
mirroring its latest schema (a test fails when a model drifts from it).

Handlers read a model instead of a dict and emit one::

    event = parse("OrdenSolicitada", envelope.payload)     # -> orders.OrdenSolicitada
    StockVerificado(order_id=event.order_id, ...).to_payload()

The models live by producer: ``orders`` (pedidos), ``inventory`` (inventario), ``payments``
(pagos). Field types (``fields``) follow the schema: uuid strings stay ``str`` and come back
unchanged; amounts are ``Decimal`` written back as two-place strings (a float is refused);
enums are ``Literal``; integers refuse bools and numeric strings. Fields a newer MINOR version
adds are dropped on parse, and nested objects refuse unknown fields, as their schemas do.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from saga_contracts import registry
from saga_contracts.events import inventory, orders, payments
from saga_contracts.events.base import Event

EVENT_MODELS: Mapping[str, type[Event]] = MappingProxyType({
    model.event_type: model for model in (*orders.MODELS, *inventory.MODELS, *payments.MODELS)})


def parse(event_type: str, payload: Any) -> Event:
    """The model of ``payload``. Raises ``registry.UnknownEventType`` for an event type without
    a model and ``registry.SchemaViolation`` for a payload the model refuses."""
    model = EVENT_MODELS.get(event_type)
    if model is None:
        raise registry.UnknownEventType(event_type)
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise registry.SchemaViolation(event_type, registry.latest(event_type).version, [
            f"{'/'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in exc.errors(include_url=False)]) from exc
