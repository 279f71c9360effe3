"""Loads the event schemas and checks payloads and schema evolution against them.

Schemas live in ``schemas/<EventType>/<MAJOR.MINOR.PATCH>.json``: every version ever published
stays in the tree, so compatibility can be checked between consecutive versions.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator, FormatChecker

SCHEMA_DIR = Path(__file__).parent / "schemas"


class UnknownEventType(LookupError):
    """No schema exists for this event type (or this major version of it)."""


class SchemaViolation(ValueError):
    """A payload does not satisfy its event schema."""

    def __init__(self, event_type: str, version: str, errors: list[str]) -> None:
        super().__init__(f"{event_type} {version}: " + "; ".join(errors))
        self.event_type = event_type
        self.version = version
        self.errors = errors


def parse_version(version: str) -> tuple[int, int, int]:
    major, minor, patch = (int(p) for p in version.split("."))
    return major, minor, patch


@dataclass(frozen=True)
class EventSchema:
    event_type: str
    version: str
    producer: str
    topic: str
    document: dict[str, Any]

    @property
    def major(self) -> int:
        return parse_version(self.version)[0]


@cache
def all_schemas() -> dict[str, list[EventSchema]]:
    """Every event type with its versions, oldest first."""
    return load_schemas(SCHEMA_DIR)


def event_schema(event_type: str, version: str, document: dict[str, Any]) -> EventSchema:
    return EventSchema(event_type, version, document["x-producer"], document["x-topic"], document)


def by_event_type(schemas: list[EventSchema]) -> dict[str, list[EventSchema]]:
    """``schemas`` grouped by event type, each type's versions oldest first."""
    found: dict[str, list[EventSchema]] = {}
    for schema in schemas:
        found.setdefault(schema.event_type, []).append(schema)
    for versions in found.values():
        versions.sort(key=lambda s: parse_version(s.version))
    return dict(sorted(found.items()))


def load_schemas(directory: Path) -> dict[str, list[EventSchema]]:
    """The schemas of a tree laid out as ``schemas/<EventType>/<version>.json``."""
    return by_event_type([event_schema(path.parent.name, path.stem, json.loads(path.read_text()))
                          for path in sorted(directory.glob("*/*.json"))])


def latest(event_type: str) -> EventSchema:
    versions = all_schemas().get(event_type)
    if not versions:
        raise UnknownEventType(event_type)
    return versions[-1]


def schema_for(event_type: str, version: str) -> EventSchema:
    """The newest schema of the same MAJOR: a consumer accepts any MINOR/PATCH of a major it knows."""
    versions = all_schemas().get(event_type)
    if not versions:
        raise UnknownEventType(event_type)
    try:
        major = parse_version(version)[0]
    except ValueError as exc:
        raise UnknownEventType(f"{event_type} with malformed schema_version {version!r}") from exc
    same_major = [s for s in versions if s.major == major]
    if not same_major:
        raise UnknownEventType(f"{event_type} major version {major}")
    return same_major[-1]


@cache
def _validator(event_type: str, version: str) -> Draft202012Validator:
    return Draft202012Validator(schema_for(event_type, version).document,
                                format_checker=FormatChecker())


def _is_uuid(value: str) -> bool:
    """jsonschema's "uuid" format: what ``uuid.UUID`` parses, in the hyphenated form."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return all(value[i] == "-" for i in (8, 13, 18, 23))


@cache
def _fast_validator(event_type: str, version: str) -> Callable[[Any], Any]:
    """The schema compiled to Python code (fastjsonschema). Every event consumed and emitted is
    validated, about eleven per saga: jsonschema's interpreter took 70 µs for each, the
    compiled check 5 µs. The schemas use only keywords both understand
    alike (tests/test_contracts.py checks that they agree, payload by payload)."""
    return fastjsonschema.compile(schema_for(event_type, version).document,
                                  formats={"uuid": _is_uuid})


def validate(event_type: str, version: str, payload: Any) -> None:
    try:
        _fast_validator(event_type, version)(payload)
        return
    except fastjsonschema.JsonSchemaValueException:
        pass  # jsonschema, the reference, says what is wrong, and all of it
    errors = sorted(_validator(event_type, version).iter_errors(payload), key=lambda e: e.path)
    if errors:
        raise SchemaViolation(event_type, version, [
            f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors
        ])


def compile_validator(event_type: str, version: str,
                      document: dict[str, Any]) -> Callable[[Any], None]:
    """``validate`` for a schema document from elsewhere (a schema registry's): compiled once,
    the same fast check and the same account of what is wrong, raising ``SchemaViolation``."""
    fast = fastjsonschema.compile(document, formats={"uuid": _is_uuid})
    reference = Draft202012Validator(document, format_checker=FormatChecker())

    def check(payload: Any) -> None:
        try:
            fast(payload)
            return
        except fastjsonschema.JsonSchemaValueException:
            pass
        errors = sorted(reference.iter_errors(payload), key=lambda e: e.path)
        if errors:
            raise SchemaViolation(event_type, version, [
                f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
                for e in errors])

    return check
def superseding_types(event_type: str) -> list[str]:
    """``event_type`` and the event types that replace it with a breaking change (their schema's
    ``x-supersedes`` names it: ``OrdenSolicitada_v4``), oldest first: the versions a producer
    may publish side by side during a transition."""
    found = [event_type]
    for name, versions in all_schemas().items():
        if versions[-1].document.get("x-supersedes") == event_type:
            found.append(name)
    if event_type not in all_schemas():
        raise UnknownEventType(event_type)
    return sorted(found, key=lambda name: parse_version(latest(name).version))


def topic_of(event_type: str) -> str:
    return latest(event_type).topic


# ------------------------------------------------------------------ evolution rules


def _type_of(prop: dict[str, Any]) -> Any:
    return prop.get("type"), prop.get("format"), prop.get("pattern")


# Versions published before the check refused what a reader of the version before refuses (a
# new enum value): OrdenCancelada 1.1.0 added the reason ``precio_rechazado``, and shipped
# together with every consumer of it. The list is closed: a version made since passes the check
# or is a new major.
PUBLISHED_BEFORE_THE_CHECK = frozenset({("OrdenCancelada", "1.1.0")})


# A bound a payload of the newer version may go beyond, whereupon a consumer of the older one,
# which validates against its schema, refuses it: raised or dropped upper bounds, lowered or
# dropped lower ones.
_UPPER_BOUNDS = ("maxLength", "maxItems", "maximum", "exclusiveMaximum")
_LOWER_BOUNDS = ("minLength", "minItems", "minimum", "exclusiveMinimum")


def _widened(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The constraints of ``old`` that ``new`` loosens (one property's schema)."""
    out = [f"{key} raised or dropped" for key in _UPPER_BOUNDS
           if key in old and not new.get(key, float("inf")) <= old[key]]
    out += [f"{key} lowered or dropped" for key in _LOWER_BOUNDS
            if key in old and not new.get(key, float("-inf")) >= old[key]]
    if "enum" in old and "enum" not in new:
        out.append("enum dropped")
    return out


def breaking_changes(old: dict[str, Any], new: dict[str, Any], path: str = "") -> list[str]:
    """What in ``new`` would break a consumer written against ``old``
    (docs/standard.md#schemas-and-their-versions), either way. A payload of ``new`` that
    ``old`` refuses, which the registry's FORWARD rule refuses too: a new enum value or an enum
    dropped, a field no longer required, a field where unknown ones are refused or unknown ones
    now taken, a bound loosened. And stricter than FORWARD, a consumer of ``new`` that could not
    read a payload of ``old``: a field removed or made required, a type, format or pattern
    changed, an enum value gone."""
    problems: list[str] = []
    old_props = old.get("properties", {})
    new_props = new.get("properties", {})
    if old.get("additionalProperties") is False:
        if new.get("additionalProperties") is not False:
            problems.append(f"object {path or '(root)'} now takes unknown fields")
        for name in sorted(set(new_props) - set(old_props)):
            problems.append(f"field {path}{name} is new where unknown fields are refused")
    for name in sorted(set(old.get("required", [])) - set(new.get("required", []))):
        problems.append(f"field {path}{name} is no longer required")
    for name, old_prop in old_props.items():
        where = f"{path}{name}"
        if name not in new_props:
            problems.append(f"field {where} was removed")
            continue
        new_prop = new_props[name]
        if _type_of(old_prop) != _type_of(new_prop):
            problems.append(f"field {where} changed type {_type_of(old_prop)} -> {_type_of(new_prop)}")
        if "enum" in old_prop and set(old_prop["enum"]) - set(new_prop.get("enum", old_prop["enum"])):
            problems.append(f"field {where} lost enum values")
        if "enum" in old_prop and set(new_prop.get("enum", ())) - set(old_prop["enum"]):
            problems.append(f"field {where} gained enum values")
        problems += [f"field {where}: {loosened}" for loosened in _widened(old_prop, new_prop)]
        if old_prop.get("type") == "object":
            problems += breaking_changes(old_prop, new_prop, f"{where}.")
        if old_prop.get("type") == "array" and isinstance(old_prop.get("items"), dict):
            problems += breaking_changes(old_prop["items"], new_prop.get("items", {}), f"{where}[].")
    for name in set(new.get("required", [])) - set(old.get("required", [])):
        problems.append(f"field {path}{name} became required")
    return problems


def check_evolution(versions: list[EventSchema]) -> list[str]:
    """Every step between consecutive versions must bump MAJOR if it breaks compatibility."""
    problems = []
    for old, new in itertools.pairwise(versions):
        o, n = parse_version(old.version), parse_version(new.version)
        if n <= o:
            problems.append(f"{new.event_type}: version {new.version} does not increase")
            continue
        if n[0] == o[0] and (new.event_type, new.version) not in PUBLISHED_BEFORE_THE_CHECK:
            for p in breaking_changes(old.document, new.document):
                problems.append(f"{new.event_type} {old.version} -> {new.version}: {p} "
                                "without a MAJOR bump")
    return problems
