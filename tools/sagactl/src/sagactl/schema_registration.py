"""``sagactl schemas register``: every schema version of the contracts into the schema registry,
a step of every deployment, and ``sagactl schemas catalog``: the schemas the registry holds, as
the repository's are read (``saga_contracts.registry``).

Each event type's MAJOR is an artifact of its own (``saga_contracts.schema_artifacts``), made
with the rules of docs/standard.md#schemas-and-their-versions before its first version: the
registry then refuses a version that breaks a consumer of the version before, and the
refusal, the registry's own words, stops the registration. A breaking change passes only as a new MAJOR, a new
artifact: a new event type.

A version already registered is left as it is when its content is the same, and refused when it
differs: what a version says never changes once published; a change is a new version.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from saga_contracts.registry import EventSchema, by_event_type, event_schema, parse_version
from saga_contracts.schema_artifacts import (
    GROUP,
    PUBLISHED_BEFORE_THE_REGISTRY,
    RULES,
    artifact_id,
    event_type_of,
    labels,
)
from sagactl.schema_registry import RegistryApi, RegistryError

PAGE = 1000


class Refused(Exception):
    """A version the registry's rules refused, or one registered with other content."""

    def __init__(self, schema: EventSchema, artifact: str, verdict: str) -> None:
        super().__init__(f"{schema.event_type} {schema.version} (artifact {artifact}): {verdict}")
        self.schema = schema
        self.artifact = artifact
        self.verdict = verdict


@dataclass(frozen=True)
class Registered:
    event_type: str
    version: str
    artifact: str
    outcome: str
    """``registered`` (new), ``unchanged`` (there already, with the same content) or
    ``retired`` (there, retired: its content is not read)."""


def verdict(error: RegistryError) -> str:
    """The registry's refusal in its own words: its title and detail, and each cause it gives
    (a rule violation names what broke, and where)."""
    body = error.body
    head = " ".join(str(body[k]) for k in ("name", "title", "detail") if body.get(k))
    causes = [f"{c.get('context') or '(root)'}: {c.get('description')}"
              for c in body.get("causes") or [] if isinstance(c, dict)]
    return "; ".join([f"HTTP {error.status} {head}".strip(), *causes])


def _path(*parts: str) -> str:
    return "".join("/" + urllib.parse.quote(p, safe="") for p in parts)


def artifact_path(group: str, artifact: str, *rest: str) -> str:
    return _path("groups", group, "artifacts", artifact, *rest)


def _ensure_artifact(api: RegistryApi, group: str, artifact: str, first: EventSchema) -> None:
    try:
        api.get(artifact_path(group, artifact))
        return
    except RegistryError as exc:
        if exc.status != 404:
            raise
    # Made empty, so that its rules hold from its first version on.
    api.post(_path("groups", group, "artifacts"), {
        "artifactId": artifact, "artifactType": "JSON", "name": artifact,
        "description": first.document.get("description", ""), "labels": labels(first)})


def _ensure_rules(api: RegistryApi, group: str, artifact: str) -> None:
    present = set(api.get(artifact_path(group, artifact, "rules")) or [])
    for rule, config in RULES.items():
        if rule not in present:
            api.post(artifact_path(group, artifact, "rules"), {"ruleType": rule, "config": config})
        elif api.get(artifact_path(group, artifact, "rules", rule)).get("config") != config:
            api.put(artifact_path(group, artifact, "rules", rule),
                    {"ruleType": rule, "config": config})


# A retired version (``sagactl schemas retire``): the registry keeps it, and hands its content
# to no one.
RETIRED = "DISABLED"


def _versions(api: RegistryApi, group: str, artifact: str) -> dict[str, str]:
    """The artifact's versions, oldest first, with their states."""
    found = api.get(artifact_path(group, artifact, "versions"),
                    {"limit": str(PAGE), "order": "asc", "orderby": "createdOn"})
    return {v["version"]: v.get("state", "ENABLED") for v in found.get("versions", [])}


def _content(api: RegistryApi, group: str, artifact: str, version: str) -> Any:
    return api.get(artifact_path(group, artifact, "versions", version, "content"))


def register(api: RegistryApi, schemas: Mapping[str, list[EventSchema]], group: str = GROUP,
             told: Callable[[Registered], None] = lambda _: None) -> list[Registered]:
    """Every version of ``schemas`` in the registry, oldest first within each artifact; raises
    ``Refused`` at the first version the registry refuses (those before it stay registered:
    each passed the rules on its own)."""
    done: list[Registered] = []
    for event_type, versions in sorted(schemas.items()):
        majors: dict[str, list[EventSchema]] = {}
        for schema in versions:
            majors.setdefault(artifact_id(event_type, schema.version), []).append(schema)
        for artifact, in_major in majors.items():
            in_major.sort(key=lambda s: parse_version(s.version))
            _ensure_artifact(api, group, artifact, in_major[0])
            # The rules hold from the version after the last one published before them.
            unchecked = max((i + 1 for i, s in enumerate(in_major)
                             if (event_type, s.version) in PUBLISHED_BEFORE_THE_REGISTRY),
                            default=0)
            if not unchecked:
                _ensure_rules(api, group, artifact)
            registered = _versions(api, group, artifact)
            for i, schema in enumerate(in_major):
                if unchecked and i == unchecked:
                    _ensure_rules(api, group, artifact)
                if registered.get(schema.version) == RETIRED:
                    outcome = "retired"  # its content no longer to be read, nor changed
                elif schema.version in registered:
                    if _content(api, group, artifact, schema.version) != schema.document:
                        raise Refused(schema, artifact, (
                            "already registered with other content; a registered version "
                            "never changes: publish the change as a new version"))
                    outcome = "unchanged"
                else:
                    try:
                        api.post(artifact_path(group, artifact, "versions"), {
                            "version": schema.version,
                            "content": {"content": json.dumps(schema.document, indent=2,
                                                           ensure_ascii=False),
                                        "contentType": "application/json"}})
                    except RegistryError as exc:
                        if exc.status in (400, 409, 422):
                            raise Refused(schema, artifact, verdict(exc)) from None
                        raise
                    outcome = "registered"
                step = Registered(event_type, schema.version, artifact, outcome)
                told(step)
                done.append(step)
            if unchecked == len(in_major):
                _ensure_rules(api, group, artifact)
    return done


def registered_schemas(api: RegistryApi, group: str = GROUP) -> dict[str, list[EventSchema]]:
    """Every version the registry holds in ``group`` and has not retired, by event type, oldest
    first."""
    try:
        found = api.get(_path("groups", group, "artifacts"), {"limit": str(PAGE)})
    except RegistryError as exc:
        if exc.status == 404:  # no artifact was ever made in the group
            return {}
        raise
    schemas = []
    for artifact in found.get("artifacts", []):
        name = artifact["artifactId"]
        event_type = event_type_of(name, artifact.get("labels"))
        for version, state in _versions(api, group, name).items():
            if state == RETIRED:
                continue
            schemas.append(event_schema(event_type, version,
                                        _content(api, group, name, version)))
    return by_event_type(schemas)
