"""``sagactl schemas register`` against an in-memory registry that keeps artifacts, rules and
versions as Apicurio's REST API does, and refuses what a rule predicate refuses: the plan (an
artifact per MAJOR, rules before the first version, nothing registered twice, a changed version
refused) without a registry. tests/e2e/test_schema_registry.py runs the same against Apicurio."""

from __future__ import annotations

import copy
import json
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from saga_contracts.registry import EventSchema, all_schemas, event_schema, load_schemas
from saga_contracts.schema_artifacts import (
    GROUP,
    PUBLISHED_BEFORE_THE_REGISTRY,
    RULES,
    artifact_id,
    event_type_of,
)
from sagactl.schema_registration import Refused, register, registered_schemas, verdict
from sagactl.schema_registry import RegistryError


class FakeRegistry:
    """Artifacts by (group, id), each with its rules and its versions in order."""

    def __init__(self, refuse: Callable[[dict[str, Any], dict[str, Any]], list[str]] | None = None
                 ) -> None:
        self.artifacts: dict[tuple[str, str], dict[str, Any]] = {}
        self.refuse = refuse or (lambda old, new: [])
        self.calls: list[str] = []

    def _parts(self, path: str) -> list[str]:
        return [urllib.parse.unquote(p) for p in path.strip("/").split("/")]

    def _artifact(self, group: str, name: str) -> dict[str, Any]:
        if (group, name) not in self.artifacts:
            raise RegistryError(404, {"title": "ArtifactNotFoundException"}, "GET")
        return self.artifacts[(group, name)]

    def get(self, path: str, query: dict[str, str] | None = None) -> Any:
        self.calls.append(f"GET {path}")
        p = self._parts(path)
        if len(p) == 3:
            found = [{"artifactId": a, "labels": v["labels"]}
                     for (g, a), v in self.artifacts.items() if g == p[1]]
            if not found:
                raise RegistryError(404, {"title": "GroupNotFoundException"}, "GET")
            return {"artifacts": found, "count": len(found)}
        art = self._artifact(p[1], p[3])
        if len(p) == 4:
            return {"artifactId": p[3], "labels": art["labels"]}
        if p[4] == "rules":
            return list(art["rules"]) if len(p) == 5 else {"config": art["rules"][p[5]]}
        states = art.setdefault("states", {})
        if len(p) == 5:
            return {"versions": [{"version": v, "state": states.get(v, "ENABLED")}
                                 for v in art["versions"]]}
        if states.get(p[5]) == "DISABLED":  # Apicurio hands a disabled version's content to no one
            raise RegistryError(404, {"title": "VersionNotFoundException"}, "GET")
        return copy.deepcopy(art["versions"][p[5]])

    def post(self, path: str, body: Any, query: dict[str, str] | None = None) -> Any:
        self.calls.append(f"POST {path}")
        p = self._parts(path)
        if len(p) == 3:
            self.artifacts[(p[1], body["artifactId"])] = {
                "labels": body["labels"], "rules": {}, "versions": {}}
            return {}
        art = self._artifact(p[1], p[3])
        if p[4] == "rules":
            art["rules"][body["ruleType"]] = body["config"]
            return None
        new = json.loads(body["content"]["content"])
        if art["versions"] and art["rules"].get("COMPATIBILITY") == "FORWARD":
            causes = self.refuse(list(art["versions"].values())[-1], new)
            if causes:
                raise RegistryError(400, {"name": "RuleViolationException", "title":
                                          "Incompatible artifact", "causes": [
                                              {"description": c, "context": "/"} for c in causes]},
                                    "POST")
        art["versions"][body["version"]] = new
        return {}

    def put(self, path: str, body: Any) -> Any:
        self.calls.append(f"PUT {path}")
        p = self._parts(path)
        if p[4] == "versions" and p[6] == "state":
            self._artifact(p[1], p[3]).setdefault("states", {})[p[5]] = body["state"]
            return None
        self._artifact(p[1], p[3])["rules"][p[5]] = body["config"]
        return body


def _version(schema: EventSchema, version: str, change: Callable[[dict], None]) -> EventSchema:
    document = copy.deepcopy(schema.document)
    change(document)
    return event_schema(schema.event_type, version, document)


def _reason_retyped(document: dict) -> None:
    document["properties"]["reason"] = {"type": "integer"}


def _breaking(old: dict, new: dict) -> list[str]:
    """What a consumer of ``old`` could not read of ``new``: a property whose type changed."""
    return [f"{name} retyped" for name, kept in old["properties"].items()
            if name in new["properties"] and new["properties"][name].get("type") != kept.get("type")]


def test_every_major_is_an_artifact_with_its_rules_made_before_its_first_version() -> None:
    fake = FakeRegistry()
    done = register(fake, all_schemas())
    assert len(done) == sum(len(v) for v in all_schemas().values())
    assert {(GROUP, "OrdenSolicitada"), (GROUP, "OrdenSolicitada_v2"),
            (GROUP, "OrdenSolicitada_v3")} <= set(fake.artifacts)
    assert list(fake.artifacts[(GROUP, "OrdenCancelada")]["versions"]) == ["1.0.0", "1.1.0"]
    for art in fake.artifacts.values():
        assert art["rules"] == RULES
    first_version = next(i for i, c in enumerate(fake.calls)
                         if c.startswith("POST") and c.endswith("/StockVerificado_v4/versions"))
    rules = [i for i, c in enumerate(fake.calls)
             if c.startswith("POST") and c.endswith("/StockVerificado_v4/rules")]
    assert len(rules) == len(RULES) and max(rules) < first_version


def test_a_version_published_before_the_registry_is_registered_before_the_rules() -> None:
    # OrdenCancelada 1.1.0 added an enum value, which the rules refuse: it came first.
    assert PUBLISHED_BEFORE_THE_REGISTRY == {("OrdenCancelada", "1.1.0")}
    fake = FakeRegistry(refuse=lambda old, new: ["reason widened"]
                        if new["properties"]["reason"] != old["properties"]["reason"] else [])
    register(fake, {"OrdenCancelada": all_schemas()["OrdenCancelada"]})
    calls = [c for c in fake.calls if c.startswith("POST") and "/OrdenCancelada/" in c]
    assert [c.rsplit("/", 1)[1] for c in calls] == ["versions", "versions", "rules", "rules"]
    # The same change as a version made since is refused.
    base = all_schemas()["OrdenCancelada"]
    widened = _version(base[-1], "1.2.0",
                       lambda d: d["properties"]["reason"]["enum"].append("otro"))
    with pytest.raises(Refused, match="reason widened"):
        register(fake, {"OrdenCancelada": [*base, widened]})


def test_registering_again_registers_nothing_and_resets_a_changed_rule() -> None:
    fake = FakeRegistry()
    register(fake, all_schemas())
    fake.artifacts[(GROUP, "OrdenCancelada")]["rules"]["COMPATIBILITY"] = "NONE"
    again = register(fake, all_schemas())
    assert {s.outcome for s in again} == {"unchanged"}
    assert fake.artifacts[(GROUP, "OrdenCancelada")]["rules"]["COMPATIBILITY"] == "FORWARD"


def test_a_registered_version_whose_content_changed_is_refused() -> None:
    fake = FakeRegistry()
    register(fake, all_schemas())
    schemas = all_schemas()
    changed = _version(schemas["OrdenCancelada"][1], "1.1.0",
                       lambda d: d.update(description="another text"))
    with pytest.raises(Refused, match="already registered with other content"):
        register(fake, {"OrdenCancelada": [schemas["OrdenCancelada"][0], changed]})


def test_a_breaking_minor_is_refused_with_the_registry_s_verdict_and_as_a_new_major_it_passes(
) -> None:
    fake = FakeRegistry(refuse=_breaking)
    base = all_schemas()["OrdenCancelada"]
    breaking = _version(base[-1], "1.2.0", _reason_retyped)
    with pytest.raises(Refused) as refused:
        register(fake, {"OrdenCancelada": [*base, breaking]})
    assert refused.value.artifact == "OrdenCancelada"
    assert "RuleViolationException" in refused.value.verdict
    assert "reason retyped" in refused.value.verdict
    assert "1.2.0" not in fake.artifacts[(GROUP, "OrdenCancelada")]["versions"]
    as_new_type = _version(base[-1], "2.0.0", _reason_retyped)
    done = register(fake, {"OrdenCancelada": [*base, as_new_type]})
    assert done[-1].artifact == "OrdenCancelada_v2" and done[-1].outcome == "registered"


def test_the_catalog_reads_back_what_was_registered() -> None:
    fake = FakeRegistry()
    register(fake, all_schemas())
    assert registered_schemas(fake) == all_schemas()
    assert registered_schemas(FakeRegistry()) == {}


def test_a_schema_tree_elsewhere_loads_as_the_contracts_do(tmp_path: Path) -> None:
    for event_type, versions in all_schemas().items():
        for schema in versions:
            (tmp_path / event_type).mkdir(exist_ok=True)
            (tmp_path / event_type / f"{schema.version}.json").write_text(
                json.dumps(schema.document))
    assert load_schemas(tmp_path) == all_schemas()


def test_artifact_names_follow_the_standard_s_version_suffix() -> None:
    assert artifact_id("OrdenSolicitada", "1.4.0") == "OrdenSolicitada"
    assert artifact_id("OrdenSolicitada", "3.0.0") == "OrdenSolicitada_v3"
    # A breaking change published as an event type of its own is its artifact.
    assert artifact_id("OrdenSolicitada_v4", "4.1.0") == "OrdenSolicitada_v4"
    with pytest.raises(ValueError, match="MAJOR 4 only"):
        artifact_id("OrdenSolicitada_v4", "5.0.0")
    assert event_type_of("OrdenSolicitada_v3", None) == "OrdenSolicitada"
    assert event_type_of("OrdenSolicitada_v3", {"event-type": "X"}) == "X"
    assert event_type_of("Pago_vX", None) == "Pago_vX"


def test_the_verdict_keeps_the_registry_s_words() -> None:
    error = RegistryError(409, {"name": "RuleViolationException", "title": "Incompatible",
                                "causes": [{"description": "required property added",
                                            "context": "/required"}]}, "POST")
    assert verdict(error) == ("HTTP 409 RuleViolationException Incompatible; "
                              "/required: required property added")
