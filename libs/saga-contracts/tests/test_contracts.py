"""The event contracts: every schema is valid, evolution rules hold, the catalog is current, and
the validators and the event models accept exactly what the schemas accept."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from saga_contracts import registry, sealing
from saga_contracts.catalog import render
from saga_contracts.events import EVENT_MODELS, parse
from saga_contracts.events.fields import UTC_TIMESTAMP_PATTERN
from saga_contracts.registry import EventSchema, breaking_changes, check_evolution
from saga_contracts.schema_artifacts import artifact_id

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


def test_each_version_has_an_artifact_of_its_own() -> None:
    """A suffixed event type (OrdenSolicitada_v4) holds its MAJOR only, and no version of the
    type it replaces takes that MAJOR: the registry's artifacts never collide."""
    owners: dict[str, str] = {}
    for event_type, versions in registry.all_schemas().items():
        for schema in versions:
            artifact = artifact_id(event_type, schema.version)
            assert owners.setdefault(artifact, event_type) == event_type, artifact


def test_orden_solicitada_v4_breaks_what_a_reader_of_orden_solicitada_reads() -> None:
    """A breaking change, which is why it is an event type of its own: published as a MAJOR of
    OrdenSolicitada it would need one."""
    before = registry.latest("OrdenSolicitada")
    after = registry.latest("OrdenSolicitada_v4")
    assert after.document["x-supersedes"] == "OrdenSolicitada"
    assert "field shipping_address.street was removed" in breaking_changes(before.document,
                                                                           after.document)


# The versions whose token is sealed as version 1 of the sealing (bound to the order only), and
# the first whose token is sealed bound to its charge (``saga_contracts.sealing``).
SEALED_V1 = {"OrdenSolicitada": ["2.0.0"], "StockVerificado": ["2.0.0", "3.0.0"]}
SEALED_V2 = {"OrdenSolicitada": "3.0.0", "StockVerificado": "4.0.0"}
SEALED_V1_PATTERN = "^sealed:v1:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9_-]{66,1424}$"


@pytest.mark.parametrize("event_type", ["OrdenSolicitada", "StockVerificado"])
def test_the_payment_token_is_sealed_from_version_2_and_bound_to_its_charge_since(
        event_type: str) -> None:
    """1.x carried the token in the clear; 2.0.0 carries it sealed, a breaking change for every
    consumer (pagos would send the sealed text to the gateway), hence the MAJOR bump. Later, a
    token sealed for one charge only (``sealed:v2``), which a pagos that opens ``sealed:v1``
    cannot open, and so another MAJOR bump. An event of an earlier version still validates
    against its own schema, and its model then refuses it."""
    def token(version: str) -> dict:
        doc = registry.schema_for(event_type, version).document
        return doc["properties"]["payment_method"]["properties"]["token"]
    assert "pattern" not in token("1.0.0")
    for version in SEALED_V1[event_type]:
        assert token(version)["pattern"] == SEALED_V1_PATTERN
    assert token(SEALED_V2[event_type])["pattern"] == sealing.PATTERN
    assert token(registry.latest(event_type).version)["pattern"] == sealing.PATTERN
    assert sealing.PATTERN.startswith("^sealed:v2:")
    assert check_evolution(registry.all_schemas()[event_type]) == []


def test_stock_verificado_4_1_says_which_strategy_ran_in_optional_fields() -> None:
    """4.1.0 adds the allocation strategy and the reservation's deadline, both optional: a 4.0
    consumer reads a 4.1 payload, and the compatibility check finds nothing that breaks it."""
    four, four_one = (registry.schema_for("StockVerificado", v).document
                      for v in ("4.0.0", "4.1.0"))
    assert registry.latest("StockVerificado").version == "4.1.0"
    assert registry.breaking_changes(four, four_one) == []
    assert {"allocation_strategy", "reserved_until"} <= set(four_one["properties"])
    assert four_one["required"] == four["required"]
    assert four_one["properties"]["allocation_strategy"]["enum"] == ["check_then_pay",
                                                                     "reserve_then_pay"]


def test_stock_verificado_3_prices_every_line() -> None:
    """3.0.0 carries each line's catalog price, and its total is the catalog's (inventario's),
    no longer the order's: a line gained a required field where lines refuse unknown ones, so
    a 2.x consumer would refuse it, hence the MAJOR bump."""
    versions = registry.all_schemas()["StockVerificado"]
    assert [v.version for v in versions] == ["1.0.0", "2.0.0", "3.0.0", "4.0.0", "4.1.0"]
    three = registry.schema_for("StockVerificado", "3.0.0").document
    line = three["properties"]["items"]["items"]
    assert "unit_price" in line["required"] and line["additionalProperties"] is False
    assert registry.breaking_changes(versions[1].document, three)
    assert versions[-1].document["properties"]["items"] == three["properties"]["items"]


def _next(schema: EventSchema, version: str, mutate) -> EventSchema:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(schema.document)
    mutate(doc)
    return EventSchema(schema.event_type, version, schema.producer, schema.topic, doc)


def _remove_required(doc: dict) -> None:
    doc["required"].remove("order_id")
    del doc["properties"]["order_id"]


def _add_optional(doc: dict) -> None:
    doc["properties"]["gift_wrap"] = {"type": "boolean"}


def _token_pattern(doc: dict) -> None:
    doc["properties"]["payment_method"]["properties"]["token"]["pattern"] = "^tok_.+$"


@pytest.mark.parametrize(("mutate", "version", "breaks"), [
    (_remove_required, "3.1.0", True),     # removing a field needs a MAJOR bump
    (_remove_required, "4.0.0", False),
    (lambda d: d["properties"]["total_amount"].update(type="number"), "3.0.1", True),
    (lambda d: d["required"].append("gift_wrap") or _add_optional(d), "3.1.0", True),
    (_add_optional, "3.1.0", False),       # an optional field is a MINOR change
    (lambda d: d["properties"]["currency"]["enum"].remove("EUR"), "3.2.0", True),
    (_token_pattern, "3.1.0", True),       # what a field holds, nested or not
    # What a reader of 3.0.0 refuses, and so the registry's FORWARD rule: a new enum value, a
    # field where unknown ones are refused.
    (lambda d: d["properties"]["currency"]["enum"].append("JPY"), "3.1.0", True),
    (lambda d: d["properties"]["payment_method"]["properties"].update(cvc={"type": "string"}),
     "3.1.0", True),
    (lambda d: d["properties"]["currency"]["enum"].append("JPY"), "4.0.0", False),
    # ... and the other ways a reader of 3.0.0 would refuse what the new version allows.
    (lambda d: d["required"].remove("customer_id"), "3.1.0", True),
    (lambda d: d["properties"]["currency"].pop("enum"), "3.1.0", True),
    (lambda d: d["properties"]["customer_id"].update(maxLength=200), "3.1.0", True),
    (lambda d: d["properties"]["customer_id"].pop("minLength"), "3.1.0", True),
    (lambda d: d["properties"]["items"].update(maxItems=100), "3.1.0", True),
    (lambda d: d["properties"]["items"].pop("minItems"), "3.1.0", True),
    (lambda d: d["properties"]["payment_method"].update(additionalProperties=True), "3.1.0",
     True),
    (lambda d: d["properties"]["items"].update(maxItems=40), "3.1.0", False),  # a reader reads it
])
def test_breaking_changes_need_a_major_bump(mutate, version: str, breaks: bool) -> None:  # type: ignore[no-untyped-def]
    current = registry.schema_for("OrdenSolicitada", "3.0.0")
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


# ------------------------------------------------------------------ the compiled validator

A_UUID = "9b1f4c1e-8f57-4a43-9d6a-0b1b8c9f3e11"
# A value for each pattern the schemas use (a new pattern needs one here).
PATTERN_SAMPLES = {
    "^(0|[1-9][0-9]{0,11})\\.[0-9]{2}$": "12.50",
    sealing.PATTERN: sealing.parse_sealing_key(sealing.new_key_pair("k1")[1]).seal(
        "tok_visa", sealing.Binding(saga_id=A_UUID, order_id=A_UUID, customer_id="c-1",
                                    currency="USD", amount_minor=1250)),
    UTC_TIMESTAMP_PATTERN: "2026-12-06T09:00:00.123456Z",
    # What the versions of before the binding took: their own pattern, no longer sealed so.
    SEALED_V1_PATTERN: "sealed:v1:k1:" + "A" * 66,
}


def _valid(schema: dict[str, Any]) -> Any:
    """An instance of ``schema`` with every property present."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: _valid(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [_valid(schema["items"]) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "string":
        if schema.get("format") == "uuid":
            return A_UUID
        if "pattern" in schema:
            return PATTERN_SAMPLES[schema["pattern"]]
        return "x" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return True
    raise AssertionError(f"no sample for {schema}")


def _variants(schema: dict[str, Any], value: Any) -> Iterator[Any]:
    """``value`` and values near it: each part of it wrong in each way the schema can tell."""
    yield value
    yield from (None, True, 0, 1.5, "text", [], {})
    kind = schema.get("type")
    if kind == "string":
        yield from ("", "x" * (schema.get("maxLength", 64) + 1), "not-a-uuid", A_UUID.upper(),
                    A_UUID.replace("-", ""), "12.5", "012.50", " 12.50", "1.234", "USD ")
    if kind in ("integer", "number"):
        yield from (schema.get("minimum", 0) - 1, schema.get("maximum", 10**9) + 1, 2.0, False)
    if kind == "array":
        yield []
        yield value * (schema.get("maxItems", 100) + 1)
        for i, item in enumerate(value):
            for wrong in _variants(schema["items"], item):
                yield [*value[:i], wrong, *value[i + 1:]]
    if kind == "object":
        yield {**value, "unexpected": 1}
        for key, sub in schema.get("properties", {}).items():
            yield {k: v for k, v in value.items() if k != key}
            for wrong in _variants(sub, value[key]):
                yield {**value, key: wrong}


@pytest.mark.parametrize("schema", [s for versions in registry.all_schemas().values()
                                    for s in versions],
                         ids=lambda s: f"{s.event_type}-{s.version}")
def test_the_compiled_validator_agrees_with_jsonschema(schema: EventSchema) -> None:
    """``validate`` trusts fastjsonschema's compiled check when it accepts a payload: it must
    accept exactly what jsonschema, the reference, accepts, payload by payload."""
    reference = Draft202012Validator(schema.document, format_checker=FormatChecker())
    fast = registry._fast_validator(schema.event_type, schema.version)
    base = _valid(schema.document)
    assert reference.is_valid(base), list(reference.iter_errors(base))
    verdicts = {True: 0, False: 0}
    for payload in _variants(schema.document, base):
        try:
            fast(payload)
            fast_says = True
        except fastjsonschema.JsonSchemaValueException:
            fast_says = False
        assert fast_says is reference.is_valid(payload), payload
        verdicts[fast_says] += 1
    assert verdicts[True] and verdicts[False] > 10, verdicts


@pytest.mark.parametrize("event_type", sorted(EVENT_MODELS))
def test_the_event_models_accept_what_jsonschema_accepts(event_type: str) -> None:
    """A handler is given the model of a payload the registry let through, and a producer's
    model is written as a payload the registry lets through: ``parse`` must accept exactly what
    jsonschema accepts, payload by payload (two edge cases aside, in test_events.py)."""
    schema = registry.latest(event_type)
    reference = Draft202012Validator(schema.document, format_checker=FormatChecker())
    verdicts = {True: 0, False: 0}
    for payload in _variants(schema.document, _valid(schema.document)):
        try:
            model = parse(event_type, payload)
        except registry.SchemaViolation:
            accepted = False
        else:
            accepted = True
            registry.validate(event_type, schema.version, model.to_payload())
        assert accepted is reference.is_valid(payload), payload
        verdicts[accepted] += 1
    assert verdicts[True] and verdicts[False] > 10, verdicts


def test_the_one_version_published_before_the_check_is_the_one_it_would_refuse() -> None:
    """OrdenCancelada 1.1.0 added a reason a reader of 1.0.0 refuses; it is let through by name,
    and nothing else is."""
    one, one_one = registry.all_schemas()["OrdenCancelada"][:2]
    assert breaking_changes(one.document, one_one.document) == ["field reason gained enum values"]
    assert registry.PUBLISHED_BEFORE_THE_CHECK == {("OrdenCancelada", "1.1.0")}
