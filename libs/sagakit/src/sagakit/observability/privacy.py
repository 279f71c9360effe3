"""Which fields are sensitive, declared on the data models, and how they are hidden in logs.

Declarations come from two places: ``x-sensitive`` in the event schemas (the wire models) and
``Sensitive`` markers on a service's own pydantic models (``declare_model``). Each field is
either masked (its presence stays visible) or omitted. What no declaration reaches (a token
quoted in a message or an exception's text) is hidden by its shape: ``scrub``
(``saga_contracts.redaction``).
"""

from __future__ import annotations

from typing import Any

from saga_contracts import redaction
from saga_contracts.redaction import MASK, Treatment, scrub

__all__ = ["MASK", "Sensitive", "Treatment", "declare_model", "redact", "scrub",
           "sensitive_fields"]

_declared: dict[str, Treatment] = {}


class Sensitive:
    """Marker for ``Annotated[str, Sensitive("mask")]`` on a pydantic model field."""

    def __init__(self, treatment: Treatment = "mask") -> None:
        self.treatment = treatment


def declare_model(model: Any) -> None:
    """Registers the ``Sensitive`` fields of a pydantic model (and of its nested models)."""
    for name, info in model.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, Sensitive):
                _fields()[name] = meta.treatment
        annotation = info.annotation
        if hasattr(annotation, "model_fields"):
            declare_model(annotation)


def sensitive_fields() -> dict[str, Treatment]:
    return dict(_fields())


def _fields() -> dict[str, Treatment]:
    if not _declared:
        _declared.update(redaction.schema_declarations())
    return _declared


def redact(value: Any) -> Any:
    """A copy of ``value`` with every declared field masked or dropped, at any depth."""
    return redaction.redact(value, _fields())
