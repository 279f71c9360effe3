"""Which fields are sensitive, declared on the data models, and how they are hidden in logs.

Declarations come from two places: ``x-sensitive`` in the event schemas (the wire models) and
``Sensitive`` markers on a service's own pydantic models (``declare_model``). Each field is
either masked (its presence stays visible) or omitted.
"""

from __future__ import annotations

from typing import Any, Literal

from saga_contracts import registry

Treatment = Literal["mask", "omit"]
MASK = "[MASKED]"

_declared: dict[str, Treatment] = {}


class Sensitive:
    """Marker for ``Annotated[str, Sensitive("mask")]`` on a pydantic model field."""

    def __init__(self, treatment: Treatment = "mask") -> None:
        self.treatment = treatment


def _collect_schema(node: Any) -> None:
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if isinstance(prop, dict) and prop.get("x-sensitive"):
                _declared[name] = prop["x-sensitive"]
            _collect_schema(prop)
        if isinstance(node.get("items"), dict):
            _collect_schema(node["items"])


def _load_schema_declarations() -> None:
    for versions in registry.all_schemas().values():
        for schema in versions:
            _collect_schema(schema.document)


def declare_model(model: Any) -> None:
    """Registers the ``Sensitive`` fields of a pydantic model (and of its nested models)."""
    for name, info in model.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, Sensitive):
                _declared[name] = meta.treatment
        annotation = info.annotation
        if hasattr(annotation, "model_fields"):
            declare_model(annotation)


def sensitive_fields() -> dict[str, Treatment]:
    return dict(_fields())


def _fields() -> dict[str, Treatment]:
    if not _declared:
        _load_schema_declarations()
    return _declared


_CONTAINERS = (dict, list, tuple)


def redact(value: Any) -> Any:
    """A copy of ``value`` with every declared field masked or dropped, at any depth."""
    fields = _fields()

    # Every log line passes through here (sagakit.observability.structured_logging): only
    # containers are walked, a scalar is taken as it is.
    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            out = {}
            for k, item in v.items():
                treatment = fields.get(k)
                if treatment is None:
                    out[k] = walk(item) if isinstance(item, _CONTAINERS) else item
                elif treatment == "mask":
                    out[k] = MASK if item is not None else None
            return out
        if isinstance(v, _CONTAINERS):
            return [walk(i) if isinstance(i, _CONTAINERS) else i for i in v]
        return v

    return walk(value)
