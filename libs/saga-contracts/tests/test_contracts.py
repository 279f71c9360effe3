"""The event contracts: every schema is valid, evolution rules hold, the catalog is current."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from saga_contracts import registry
from saga_contracts.catalog import render
from saga_contracts.registry import EventSchema, check_evolution

ROOT = Path(__file__).resolve().parents[3]


def test_every_schema_is_a_valid_json_schema_with_a_semantic_version() -> None:
    schemas = registry.all_schemas()
    assert {"OrdenSolicitada", "StockVerificado", "StockNoDisponible", "PagoExitoso",
            "PagoRechazado", "StockAsignado", "FalloAsignacion", "ReembolsoEjecutado",
            "FalloReembolso", "StockLiberado", "OrdenCompletada", "OrdenCancelada",
            "StepTimedOut"} <= set(schemas)
    for versions in schemas.values():
        for s in versions:
            Draft202012Validator.check_schema(s.document)
            assert s.document["x-schema-version"] == s.version
            registry.parse_version(s.version)
            assert s.topic in ("order-events", "inventory-events", "payment-events")


def test_the_committed_schemas_evolve_compatibly() -> None:
    for versions in registry.all_schemas().values():
        assert check_evolution(versions) == []


def _next(schema: EventSchema, version: str, mutate) -> EventSchema:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(schema.document)
    mutate(doc)
    return EventSchema(schema.event_type, version, schema.producer, schema.topic, doc)


def _remove_required(doc: dict) -> None:
    doc["required"].remove("order_id")
    del doc["properties"]["order_id"]


def _add_optional(doc: dict) -> None:
    doc["properties"]["gift_wrap"] = {"type": "boolean"}


@pytest.mark.parametrize(("mutate", "version", "breaks"), [
    (_remove_required, "1.1.0", True),     # removing a field needs a MAJOR bump
    (_remove_required, "2.0.0", False),
    (lambda d: d["properties"]["total_amount"].update(type="number"), "1.0.1", True),
    (lambda d: d["required"].append("gift_wrap") or _add_optional(d), "1.1.0", True),
    (_add_optional, "1.1.0", False),       # an optional field is a MINOR change
    (lambda d: d["properties"]["currency"]["enum"].remove("EUR"), "1.2.0", True),
])
def test_breaking_changes_need_a_major_bump(mutate, version: str, breaks: bool) -> None:  # type: ignore[no-untyped-def]
    current = registry.latest("OrdenSolicitada")
    problems = check_evolution([current, _next(current, version, mutate)])
    assert bool(problems) is breaks, problems


def test_payloads_are_validated() -> None:
    registry.validate("OrdenCompletada", "1.0.0", {
        "order_id": "9b1f4c1e-8f57-4a43-9d6a-0b1b8c9f3e11", "total_amount": "10.00",
        "currency": "USD"})
    with pytest.raises(registry.SchemaViolation) as err:
        registry.validate("OrdenCompletada", "1.0.0", {"order_id": "x", "total_amount": 10.5,
                                                      "currency": "USD"})
    assert "order_id" in str(err.value) and "total_amount" in str(err.value)
    with pytest.raises(registry.UnknownEventType):
        registry.validate("OrdenCompletada", "9.0.0", {})
    with pytest.raises(registry.UnknownEventType):
        registry.validate("NoSuchEvent", "1.0.0", {})


def test_the_event_catalog_is_generated_from_the_schemas() -> None:
    assert (ROOT / "docs/events.md").read_text() == render(), \
        "run: uv run python -m saga_contracts.catalog docs/events.md"
