"""The typed event models: one per schema, each the same shape as its latest schema, and a
payload survives parse -> to_payload unchanged."""

from __future__ import annotations

import copy
import typing
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, StringConstraints, ValidationError

from saga_contracts import registry, sealing
from saga_contracts.events import EVENT_MODELS, inventory, orders, parse, payments
from saga_contracts.events.base import Event
from saga_contracts.events.fields import Uuid
from saga_contracts.events.inventory import (
    PrecioRechazado,
    PricedLine,
    RefusedLine,
    StockLine,
    StockVerificado,
)
from saga_contracts.events.orders import OrdenSolicitada, OrderLine, PaymentMethod, ShippingAddress
from saga_contracts.events.payments import PagoExitoso

A_UUID = "9b1f4c1e-8f57-4a43-9d6a-0b1b8c9f3e11"
_, _PUBLIC = sealing.new_key_pair("test")
SEALED = sealing.parse_sealing_key(_PUBLIC).seal("tok_visa_4242", sealing.Binding(
    saga_id=A_UUID, order_id=A_UUID, customer_id="c-1", currency="USD", amount_minor=2397))
ORDER: dict[str, Any] = {
    "order_id": A_UUID, "customer_id": "c-1",
    "items": [{"sku": "A", "quantity": 1, "price": "10.00"},
              {"sku": "B", "quantity": 2, "price": "5.50"},
              {"sku": "C", "quantity": 3, "price": "0.99"}],
    "total_amount": "23.97", "currency": "USD",
    "shipping_address": {"street": "Calle 1", "city": "Lima", "country": "PE",
                         "postal_code": "15001"},
    "payment_method": {"type": "credit_card", "token": SEALED},
}


def _all_subclasses(cls: type) -> set[type]:
    found: set[type] = set(cls.__subclasses__())
    return found.union(*(_all_subclasses(c) for c in found))


# ------------------------------------------------------------------ one model per schema


def test_there_is_a_model_for_every_schema_and_a_schema_for_every_model() -> None:
    assert set(EVENT_MODELS) == set(registry.all_schemas())
    assert set(EVENT_MODELS.values()) == {m for m in _all_subclasses(Event)
                                          if m.__module__.startswith("saga_contracts.")}
    for event_type, model in EVENT_MODELS.items():
        assert model.event_type == model.__name__ == event_type


@pytest.mark.parametrize(("module", "producer"),
                         [(orders, "pedidos"), (inventory, "inventario"), (payments, "pagos")])
def test_models_live_with_their_producer(module: Any, producer: str) -> None:
    assert module.MODELS
    for model in module.MODELS:
        assert registry.latest(model.event_type).producer == producer, model


# ------------------------------------------------------------------ drift from the schema

# The keywords that make a payload valid or not; the others (titles, descriptions, x-*) are
# documentation. A keyword in neither list stops the comparison: it needs a rule here.
_COMPARED = ("type", "format", "pattern", "enum", "minLength", "maxLength", "minimum", "maximum",
             "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems")
_STRUCTURE = ("properties", "required", "additionalProperties", "items", "const", "anyOf", "$ref")
_DOCUMENTATION = ("title", "description", "default", "$schema", "$id", "$defs")


def _shape(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """What a JSON Schema node accepts, in one normal form: references resolved, ``const`` as a
    one-value enum, an optional field's ``anyOf [T, null]`` as T (the field's absence is what
    ``required`` says), objects open unless they say otherwise."""
    if "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o != {"type": "null"}]
        assert len(options) == 1, f"no rule for anyOf {node['anyOf']}"
        node = {**{k: v for k, v in node.items() if k != "anyOf"}, **options[0]}
        return _shape(node, defs)
    unknown = [k for k in node if k not in (*_COMPARED, *_STRUCTURE, *_DOCUMENTATION)
               and not k.startswith("x-")]
    assert not unknown, f"no rule for keywords {unknown}"
    shape = {k: node[k] for k in _COMPARED if k in node}
    if "const" in node:
        shape["enum"] = [node["const"]]
    if node.get("type") == "object":
        shape["properties"] = {name: _shape(prop, defs)
                               for name, prop in node.get("properties", {}).items()}
        shape["required"] = sorted(node.get("required", []))
        shape["additionalProperties"] = node.get("additionalProperties", True)
    if node.get("type") == "array":
        shape["items"] = _shape(node["items"], defs)
    return shape


def _differences(model: dict[str, Any], schema: dict[str, Any], path: str = "") -> list[str]:
    found = []
    for key in sorted(set(model) | set(schema)):
        mine, theirs = model.get(key), schema.get(key)
        if key == "properties" and mine is not None and theirs is not None:
            for name in sorted(set(mine) - set(theirs)):
                found.append(f"{path}{name}: only in the model")
            for name in sorted(set(theirs) - set(mine)):
                found.append(f"{path}{name}: only in the schema")
            for name in sorted(set(mine) & set(theirs)):
                found += _differences(mine[name], theirs[name], f"{path}{name}.")
        elif key == "items" and mine is not None and theirs is not None:
            found += _differences(mine, theirs, f"{path.rstrip('.')}[].")
        elif mine != theirs:
            found.append(f"{path or '(root).'}{key}: model {mine!r}, schema {theirs!r}")
    return found


def _drift(model: type[Event], document: dict[str, Any]) -> list[str]:
    generated = model.model_json_schema()
    return _differences(_shape(generated, generated.get("$defs", {})), _shape(document, {}))


def _sensitive_in_schema(node: dict[str, Any], path: str = "") -> set[str]:
    found = set()
    for name, prop in node.get("properties", {}).items():
        if prop.get("x-sensitive"):
            found.add(f"{path}{name}")
        found |= _sensitive_in_schema(prop, f"{path}{name}.")
        if isinstance(prop.get("items"), dict):
            found |= _sensitive_in_schema(prop["items"], f"{path}{name}[].")
    return found


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _nested_models(arg)]


def _hidden_from_repr(model: type[BaseModel], path: str = "") -> set[str]:
    found = set()
    for name, info in model.model_fields.items():
        if not info.repr:
            found.add(f"{path}{name}")
        suffix = "[]." if typing.get_origin(info.annotation) is tuple else "."
        for nested in _nested_models(info.annotation):
            found |= _hidden_from_repr(nested, f"{path}{name}{suffix}")
    return found


@pytest.mark.parametrize("event_type", sorted(EVENT_MODELS))
def test_the_model_has_the_shape_of_the_latest_schema(event_type: str) -> None:
    """Field names, required or optional, scalar types and formats, patterns, bounds, enums and
    nested objects: the JSON Schema pydantic derives from the model against the schema's."""
    assert _drift(EVENT_MODELS[event_type], registry.latest(event_type).document) == []


@pytest.mark.parametrize("event_type", sorted(EVENT_MODELS))
def test_sensitive_fields_stay_out_of_repr(event_type: str) -> None:
    """A model in a log line must not carry what the schema marks ``x-sensitive``."""
    assert (_hidden_from_repr(EVENT_MODELS[event_type])
            == _sensitive_in_schema(registry.latest(event_type).document))


def test_repr_hides_the_token_and_the_address() -> None:
    text = repr(parse("OrdenSolicitada", ORDER))
    assert SEALED not in text and "Calle 1" not in text and "sku='A'" in text


@pytest.mark.parametrize("token", ["tok_visa_4242", "sealed:v2:test:short", SEALED + "\n",
                                   SEALED.replace("sealed:v2:", "sealed:v1:"),
                                   SEALED.replace("sealed:v2:", "sealed:v3:")])
def test_a_payment_token_that_is_not_sealed_is_refused(token: str) -> None:
    """The wire never carries a token in the clear: the models refuse one, as the schema does."""
    with pytest.raises(registry.SchemaViolation):
        parse("OrdenSolicitada", {**ORDER, "payment_method": {"type": "credit_card",
                                                               "token": token}})
    with pytest.raises(ValidationError):
        PaymentMethod(type="credit_card", token=token)


def _optional(doc: dict[str, Any]) -> None:
    doc["required"].remove("customer_id")


def _new_field(doc: dict[str, Any]) -> None:
    doc["properties"]["gift_wrap"] = {"type": "boolean"}


def _nested_bound(doc: dict[str, Any]) -> None:
    doc["properties"]["items"]["items"]["properties"]["quantity"]["maximum"] = 999


def _nested_type(doc: dict[str, Any]) -> None:
    doc["properties"]["items"]["items"]["properties"]["price"] = {"type": "number"}


def _enum(doc: dict[str, Any]) -> None:
    doc["properties"]["currency"]["enum"].append("JPY")


def _format(doc: dict[str, Any]) -> None:
    del doc["properties"]["order_id"]["format"]


def _closed(doc: dict[str, Any]) -> None:
    doc["additionalProperties"] = False


@pytest.mark.parametrize("mutate", [_optional, _new_field, _nested_bound, _nested_type, _enum,
                                    _format, _closed])
def test_the_drift_check_sees_a_changed_schema(mutate: Callable[[dict[str, Any]], None]) -> None:
    document = copy.deepcopy(registry.latest("OrdenSolicitada").document)
    mutate(document)
    assert _drift(OrdenSolicitada, document)


class _WithOptional(Event):
    """No schema has an optional field yet: this one shows how a model declares one."""

    event_type: ClassVar[str] = "WithOptional"

    order_id: Uuid
    note: Annotated[str, StringConstraints(min_length=1)] | None = None


WITH_OPTIONAL = {"type": "object", "additionalProperties": True, "required": ["order_id"],
                 "properties": {"order_id": {"type": "string", "format": "uuid"},
                                "note": {"type": "string", "minLength": 1}}}


def test_an_optional_field_is_a_default_of_none_and_left_out_when_unset() -> None:
    assert _drift(_WithOptional, WITH_OPTIONAL) == []
    assert _drift(_WithOptional, {**WITH_OPTIONAL, "required": ["order_id", "note"]})
    assert _WithOptional(order_id=A_UUID).to_payload() == {"order_id": A_UUID}
    assert _WithOptional(order_id=A_UUID, note="n").to_payload() == {"order_id": A_UUID,
                                                                      "note": "n"}


# ------------------------------------------------------------------ round trips


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=5)


def _payloads(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Payloads valid against ``node``, with every optional field present or not."""
    if "enum" in node:
        return st.sampled_from(node["enum"])
    kind = node["type"]
    if kind == "object":
        required = set(node.get("required", []))
        props = node.get("properties", {})
        return st.fixed_dictionaries(
            {k: _payloads(v) for k, v in props.items() if k in required},
            optional={k: _payloads(v) for k, v in props.items() if k not in required})
    if kind == "array":
        return st.lists(_payloads(node["items"]), min_size=node.get("minItems", 0),
                        max_size=min(node.get("maxItems", 4), 4))
    if kind == "string":
        if node.get("format") == "uuid":
            return st.uuids().map(str) | st.uuids().map(lambda u: str(u).upper())
        if "pattern" in node:
            return st.from_regex(node["pattern"], fullmatch=True)
        return st.text(min_size=node.get("minLength", 0), max_size=node.get("maxLength", 20))
    if kind == "integer":
        return st.integers(min_value=node.get("minimum"), max_value=node.get("maximum"))
    raise AssertionError(f"no strategy for {node}")


@pytest.mark.parametrize("event_type", sorted(EVENT_MODELS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          database=None)
@given(data=st.data())
def test_a_payload_survives_parse_and_to_payload(event_type: str, data: st.DataObject) -> None:
    """Whatever the schema accepts, the model takes and gives back unchanged, except fields the
    schema does not name (a newer MINOR version's), which are dropped."""
    schema = registry.latest(event_type)
    known = data.draw(_payloads(schema.document), label="payload")
    names = set(schema.document["properties"])
    extras = data.draw(st.dictionaries(st.text(max_size=8).filter(lambda k: k not in names),
                                       _json_values(), max_size=2), label="extras")
    registry.validate(event_type, schema.version, {**known, **extras})

    model = parse(event_type, {**known, **extras})
    payload = model.to_payload()

    assert type(model) is EVENT_MODELS[event_type]
    assert payload == known
    registry.validate(event_type, schema.version, payload)
    assert parse(event_type, payload) == model


def test_order_payload_round_trips_in_schema_order() -> None:
    payload = parse("OrdenSolicitada", ORDER).to_payload()
    assert payload == ORDER
    assert list(payload) == list(registry.latest("OrdenSolicitada").document["properties"])


# ------------------------------------------------------------------ models built in Python


def _order(**changes: Any) -> OrdenSolicitada:
    fields: dict[str, Any] = {
        "order_id": A_UUID, "customer_id": "c-1",
        "items": (OrderLine(sku="A", quantity=2, price=Decimal("5")),),
        "total_amount": Decimal("10"), "currency": "EUR",
        "shipping_address": ShippingAddress(street="s", city="c", country="PE", postal_code="1"),
        "payment_method": PaymentMethod(type="credit_card", token=SEALED),
    }
    return OrdenSolicitada(**{**fields, **changes})


@pytest.mark.parametrize(("amount", "written"), [
    (Decimal("10"), "10.00"), (Decimal("12.5"), "12.50"), (Decimal("1E+2"), "100.00"),
    (Decimal("-0"), "0.00"), (Decimal("0.00"), "0.00"), (Decimal("999999999999.99"), "999999999999.99"),
    ("7.25", "7.25"),
])
def test_an_amount_is_written_with_two_places(amount: Any, written: str) -> None:
    payload = _order(total_amount=amount).to_payload()
    assert payload["total_amount"] == written
    registry.validate("OrdenSolicitada", registry.latest("OrdenSolicitada").version, payload)


@pytest.mark.parametrize("amount", [
    12.5, 12, Decimal("0.001"), Decimal("-1"), Decimal("1000000000000"), Decimal("NaN"),
    Decimal("Infinity"), "12.5", "012.50", "-1.00", " 12.50", True,
])
def test_an_amount_that_does_not_fit_the_schema_is_refused(amount: Any) -> None:
    with pytest.raises(ValidationError):
        _order(total_amount=amount)


@settings(max_examples=200, deadline=None, database=None)
@given(amount=st.decimals(min_value=0, max_value=Decimal("999999999999.99"), places=2))
def test_every_amount_that_fits_is_written_back_exactly(amount: Decimal) -> None:
    payload = PagoExitoso(order_id=A_UUID, payment_id=A_UUID, charge_id="ch_1", amount=amount,
                          currency="USD").to_payload()
    registry.validate("PagoExitoso", "1.0.0", payload)
    assert Decimal(payload["amount"]) == amount


def test_a_model_built_in_python_equals_the_parse_of_its_payload() -> None:
    order = _order()
    line = PricedLine(sku="A", quantity=2, unit_price=Decimal("5.00"))
    verified = StockVerificado(order_id=order.order_id, items=[line],
                               total_amount=order.total_amount, currency=order.currency,
                               payment_method=order.payment_method)
    for model in (order, verified):
        payload = model.to_payload()
        registry.validate(model.event_type, registry.latest(model.event_type).version, payload)
        assert parse(model.event_type, payload) == model
    assert verified.items == (line,)  # a list given, a tuple kept


def test_a_refused_line_leaves_out_the_catalog_price_a_product_lacks() -> None:
    unpriced = RefusedLine(sku="A", problem="sin_precio", price=Decimal("0.01"), currency="USD")
    priced = RefusedLine(sku="B", problem="precio_distinto", price=Decimal("0.01"),
                         currency="USD", catalog_price=Decimal("50.00"), catalog_currency="USD")
    refused = PrecioRechazado(order_id=A_UUID, reason="r", refused=[unpriced, priced])
    payload = refused.to_payload()
    assert payload["refused"][0] == {"sku": "A", "problem": "sin_precio", "price": "0.01",
                                     "currency": "USD"}
    assert payload["refused"][1]["catalog_price"] == "50.00"
    assert parse("PrecioRechazado", payload) == refused
    with pytest.raises(registry.SchemaViolation):  # absent, never null, as in the schema
        parse("PrecioRechazado", {**payload, "refused": [{**payload["refused"][0],
                                                          "catalog_price": None}]})


def test_models_are_frozen() -> None:
    order = _order()
    with pytest.raises(ValidationError):
        order.currency = "USD"
    with pytest.raises(ValidationError):
        order.items[0].quantity = 3
    assert hash(order.items[0]) == hash(OrderLine(sku="A", quantity=2, price=Decimal("5.00")))


@pytest.mark.parametrize(("field", "value"), [
    ("order_id", "not-a-uuid"), ("order_id", A_UUID.replace("-", "")), ("currency", "JPY"),
    ("customer_id", ""), ("items", ()), ("items", (OrderLine(sku="A", quantity=1, price=Decimal(1)),) * 51),
])
def test_a_field_that_does_not_fit_the_schema_is_refused(field: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        _order(**{field: value})


@pytest.mark.parametrize("quantity", [0, 1001, True, "3", 2.5, None])
def test_a_quantity_is_a_json_integer_in_bounds(quantity: Any) -> None:
    with pytest.raises(ValidationError):
        StockLine(sku="A", quantity=quantity)


def test_an_integral_float_is_an_integer_as_in_json_schema() -> None:
    assert StockLine(sku="A", quantity=2.0).quantity == 2


def test_nested_objects_refuse_unknown_fields_as_their_schemas_do() -> None:
    with pytest.raises(registry.SchemaViolation):
        parse("OrdenSolicitada", {**ORDER, "payment_method": {**ORDER["payment_method"],
                                                               "cvv": "123"}})


# ------------------------------------------------------------------ parse


def test_parse_names_what_is_wrong() -> None:
    with pytest.raises(registry.SchemaViolation) as err:
        parse("OrdenSolicitada", {**ORDER, "total_amount": 23.97, "items": [{"sku": "A"}]})
    assert err.value.event_type == "OrdenSolicitada" and err.value.version == "3.0.0"
    message = str(err.value)
    assert "total_amount" in message and "items/0/quantity" in message and "items/0/price" in message


def test_parse_refuses_an_event_type_without_a_model() -> None:
    with pytest.raises(registry.UnknownEventType):
        parse("NoSuchEvent", {})


@pytest.mark.parametrize(("event_type", "payload"), [
    # jsonschema's "uuid" format takes whatever uuid.UUID parses with hyphens at 8, 13, 18 and
    # 23, braces included; the model takes RFC 4122's string form only.
    ("OrdenCompletada", {"order_id": "{9b1f4c1-8f57-4a43-9d6a-0b1b8c9f3e11e}",
                         "total_amount": "1.00", "currency": "USD"}),
    # Python's re lets "$" match before a final newline; JSON Schema's regexes (ECMA-262), the
    # compiled validator and the model do not.
    ("OrdenCompletada", {"order_id": A_UUID, "total_amount": "1.00\n", "currency": "USD"}),
])
def test_the_model_is_stricter_than_the_python_validators_on_two_edge_cases(
        event_type: str, payload: dict[str, Any]) -> None:
    registry.validate(event_type, "1.0.0", payload)
    with pytest.raises(registry.SchemaViolation):
        parse(event_type, payload)
