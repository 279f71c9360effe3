"""Renders the event catalog (docs/events.md) from the schemas: `python -m saga_contracts.catalog`."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from saga_contracts.events import EVENT_MODELS
from saga_contracts.registry import EventSchema, all_schemas


def _fields(schema: dict[str, Any], prefix: str = "") -> list[str]:
    rows = []
    required = set(schema.get("required", []))
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type", "")
        if kind == "array" and isinstance(prop.get("items"), dict):
            kind = f"array of {prop['items'].get('type', '')}"
        notes = []
        if "enum" in prop:
            notes.append("one of " + ", ".join(f"`{v}`" for v in prop["enum"]))
        if "pattern" in prop:
            notes.append(f"pattern `{prop['pattern']}`")
        if prop.get("format"):
            notes.append(prop["format"])
        if prop.get("x-sensitive"):
            notes.append(f"sensitive ({prop['x-sensitive']} in logs)")
        if prop.get("description"):
            notes.append(prop["description"])
        rows.append(f"| `{prefix}{name}` | {kind} | {'yes' if name in required else 'no'} | "
                    f"{'; '.join(notes)} |")
        if prop.get("type") == "object":
            rows += _fields(prop, f"{prefix}{name}.")
        if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
            rows += _fields(prop["items"], f"{prefix}{name}[].")
    return rows


def render(schemas: Mapping[str, list[EventSchema]] | None = None) -> str:
    """The catalog of ``schemas`` (event type to its versions, oldest first): the repository's
    by default; ``sagactl schemas catalog`` gives those a schema registry holds."""
    schemas = all_schemas() if schemas is None else schemas
    out = ["# Event catalog", "",
           "Generated from the event schemas, `libs/saga-contracts/src/saga_contracts/schemas`, "
           "by `python -m saga_contracts.catalog`; do not edit by hand. `sagactl schemas "
           "catalog` renders the same page from the schema registry they are registered in "
           "([operations](operations.md#the-schema-registry)).", "",
           "Every event travels in the envelope of the standard "
           "([the event envelope](standard.md#the-event-envelope)): `message_id`, "
           "`saga_id`, `span_id`, `parent_span_id`, `schema_version`, `timestamp`, "
           "`source_service`, `event_type`, `payload`, `metadata`. The tables below describe "
           "`payload`.", "",
           "In Python each payload is a frozen pydantic model of `saga_contracts.events`, named as "
           "its event type and mirroring its latest schema. A handler gets its event's payload as "
           "its model (`Message[OrdenSolicitada]`, parsed once by the consumer) and emits "
           "models (`uow.emit(StockVerificado(...))`); `parse(event_type, payload)` builds one "
           "from a dict and `model.to_payload()` gives the JSON form back.", ""]
    for event_type, versions in sorted(schemas.items()):
        latest = versions[-1]
        model = EVENT_MODELS.get(event_type)
        out += [f"## {event_type}", "",
                f"{latest.document.get('description', '')}", "",
                f"Producer: **{latest.producer}** · topic `{latest.topic}` · versions: "
                + ", ".join(v.version for v in versions)
                + (f" · model `{model.__module__}.{model.__qualname__}`" if model else ""), "",
                "| field | type | required | notes |", "|---|---|---|---|",
                *_fields(latest.document), ""]
    return "\n".join(out)


def main() -> None:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    text = render()
    if target:
        target.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
