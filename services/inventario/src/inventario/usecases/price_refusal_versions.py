"""PrecioRechazado in the versions inventario publishes
(``INVENTARIO_PUBLISHES_PRECIO_RECHAZADO``): ``PrecioRechazado`` (MAJOR 1, its problem codes in
Spanish) and ``PrecioRechazado_v2`` (the same codes in English, as every code the project adds
is: docs/architecture.md#naming-the-standards-words-and-ours), side by side while their
consumers move from one to the other (docs/operations.md#evolving-an-event-schema).

One refusal, written in either version: the same items, each problem under its version's code,
and the reason in its version's words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from saga_contracts.events.inventory import PrecioRechazado, PrecioRechazado_v2, PriceRefusal

MODELS: dict[str, type[PrecioRechazado] | type[PrecioRechazado_v2]] = {
    PrecioRechazado.event_type: PrecioRechazado,
    PrecioRechazado_v2.event_type: PrecioRechazado_v2,
}
"""The versions of the event, by event type, oldest first."""

REASONS = {
    PrecioRechazado.event_type: "precio distinto del catálogo",
    PrecioRechazado_v2.event_type: "not the catalog's price",
}
"""The reason each version gives: free text, for people; a consumer reads the codes."""

# The codes MAJOR 1 writes in Spanish, by the English code PrecioRechazado_v2 writes
# (inventario.domain.pricing.PriceProblem's values).
_MAJOR_1_CODES = {"not_priced": "sin_precio", "other_currency": "moneda_distinta",
                  "other_price": "precio_distinto"}
_ENGLISH = {spanish: english for english, spanish in _MAJOR_1_CODES.items()}


def _code_in(event_type: str, code: str) -> str:
    """``code``, in either version's words, as ``event_type`` writes it."""
    english = _ENGLISH.get(code, code)
    return _MAJOR_1_CODES[english] if event_type == PrecioRechazado.event_type else english


def as_version(refusal: PriceRefusal, event_type: str) -> PriceRefusal:
    """``refusal`` written as ``event_type`` (one of ``MODELS``)."""
    if refusal.event_type == event_type:
        return refusal
    fields: dict[str, Any] = refusal.to_payload()
    fields["reason"] = REASONS[event_type]
    fields["refused"] = [{**line, "problem": _code_in(event_type, line["problem"])}
                         for line in fields["refused"]]
    return MODELS[event_type].model_validate(fields)


def in_versions(refusal: PriceRefusal, event_types: Sequence[str]) -> list[PriceRefusal]:
    """``refusal`` in each of ``event_types``, in that order."""
    return [as_version(refusal, event_type) for event_type in event_types]
