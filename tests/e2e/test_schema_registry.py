"""The schema registry as the stack runs it (Apicurio Registry; docs/operations.md, "The schema
registry"): after `make up` every schema version of the contracts is there, under its rules; a
breaking change is refused by the registry itself, in its own words, unless it comes as a new
event type; the event catalog rendered from the registry is the repository's; only the deployer
writes, and nothing is read without credentials."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from saga_contracts.catalog import render
from saga_contracts.registry import all_schemas
from saga_contracts.schema_artifacts import GROUP, RULES, artifact_id
from saga_harness import stack
from saga_harness.config import ROOT
from sagactl.schema_registration import artifact_path, verdict
from sagactl.schema_registry import Registry, RegistryError

THROWAWAY_PREFIX = "test-"


@cache
def _credentials() -> dict:
    made: dict = json.loads(stack.stack("credentials").stdout)["schema_registry"]
    return made


def _as(principal: str | None, password: str | None = None, url: str | None = None) -> Registry:
    made = _credentials()
    if principal is None:
        return Registry(url or made["url"], None, None)
    who = made["principals"][principal]
    return Registry(url or made["url"], who["username"], password or who["password"])


def _sagactl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sagactl.cli", "schemas", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_every_schema_version_of_the_contracts_is_registered_under_its_rules(
        running_stack: None) -> None:
    reader = _as("reader")
    for event_type, versions in all_schemas().items():
        for schema in versions:
            artifact = artifact_id(event_type, schema.version)
            content = reader.get(artifact_path(GROUP, artifact, "versions", schema.version,
                                               "content"))
            assert content == schema.document, (artifact, schema.version)
            for rule, config in RULES.items():
                assert reader.get(artifact_path(GROUP, artifact, "rules", rule))["config"] == \
                    config, (artifact, rule)


def test_the_confluent_compatible_api_serves_them_too(running_stack: None) -> None:
    ccompat = _as("reader", url=_credentials()["ccompat_url"])
    latest = all_schemas()["OrdenCancelada"][-1]
    subject = f"{GROUP}:{artifact_id('OrdenCancelada', latest.version)}"
    assert subject in ccompat.get("/subjects")
    found = ccompat.get(f"/subjects/{subject}/versions/latest")
    assert json.loads(found["schema"]) == latest.document
    assert found["schemaType"] == "JSON"


def _tree(root: Path, versions: dict[str, dict]) -> Path:
    for version, document in versions.items():
        folder = root / "OrdenCancelada"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{version}.json").write_text(json.dumps(document, indent=2))
    return root


@pytest.fixture
def throwaway_group(running_stack: None) -> Iterator[str]:
    """A group of this test's own, deleted with its artifacts afterwards (the local stack's
    registry allows the deployer that), and so are those earlier runs left behind: the
    contracts' own group is left as it is."""
    deployer = _as("deployer")
    for left in deployer.get("/groups", {"limit": "1000"})["groups"]:
        if left["groupId"].startswith(THROWAWAY_PREFIX):
            deployer.delete(f"/groups/{left['groupId']}")
    group = f"{THROWAWAY_PREFIX}{uuid.uuid4().hex[:12]}"
    yield group
    deployer.delete(f"/groups/{group}")
    with pytest.raises(RegistryError) as gone:
        deployer.get(f"/groups/{group}")
    assert gone.value.status == 404


def test_a_breaking_change_is_refused_by_the_registry_unless_it_is_a_new_event_type(
        throwaway_group: str, tmp_path: Path) -> None:
    group = throwaway_group
    base = {s.version: s.document for s in all_schemas()["OrdenCancelada"]}
    done = _sagactl("register", "--schemas", str(_tree(tmp_path, base)), "--group", group)
    assert done.returncode == 0, done.stderr
    # A consumer of 1.1.0 could not read it: the reason an integer.
    breaking = copy.deepcopy(base["1.1.0"])
    breaking["properties"]["reason"] = {"type": "integer"}
    # What the registry itself says of it (a dry run, which registers nothing).
    deployer = _as("deployer")
    with pytest.raises(RegistryError) as its_own:
        deployer.post(artifact_path(group, "OrdenCancelada", "versions"),
                      {"version": "1.2.0", "content": {"content": json.dumps(breaking),
                                                       "contentType": "application/json"}},
                      {"dryRun": "true"})
    # Apicurio answers a rule violation with 400 and its causes.
    assert its_own.value.status == 400 and its_own.value.body.get("causes"), its_own.value.body

    refused = _sagactl("register", "--schemas", str(_tree(tmp_path, {"1.2.0": breaking})),
                       "--group", group)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "OrdenCancelada 1.2.0" in refused.stderr
    assert verdict(its_own.value) in refused.stderr
    versions = deployer.get(artifact_path(group, "OrdenCancelada", "versions"))["versions"]
    assert [v["version"] for v in versions] == ["1.0.0", "1.1.0"]

    (tmp_path / "OrdenCancelada" / "1.2.0.json").rename(tmp_path / "OrdenCancelada" / "2.0.0.json")
    as_new_type = _sagactl("register", "--schemas", str(tmp_path), "--group", group)
    assert as_new_type.returncode == 0, as_new_type.stderr
    assert "OrdenCancelada_v2 2.0.0: registered" in as_new_type.stdout
    assert deployer.get(artifact_path(group, "OrdenCancelada_v2", "versions", "2.0.0",
                                      "content")) == breaking


def test_the_catalog_rendered_from_the_registry_is_the_repository_s(
        running_stack: None, tmp_path: Path) -> None:
    done = _sagactl("catalog", str(tmp_path / "events.md"))
    assert done.returncode == 0, done.stderr
    from_registry = (tmp_path / "events.md").read_text()
    assert from_registry == render()
    assert from_registry == (ROOT / "docs/events.md").read_text()


def test_only_the_deployer_writes_and_nothing_is_read_without_credentials(
        running_stack: None) -> None:
    artifact = artifact_path(GROUP, "OrdenCancelada")
    new_version = {"version": "9.9.9", "content": {"content": "{}",
                                                   "contentType": "application/json"}}
    with pytest.raises(RegistryError) as as_reader:
        _as("reader").post(artifact_path(GROUP, "OrdenCancelada", "versions"), new_version)
    assert as_reader.value.status == 403
    with pytest.raises(RegistryError) as anonymous:
        _as(None).get(artifact)
    assert anonymous.value.status == 401
    with pytest.raises(RegistryError) as wrong_password:
        _as("deployer", password="not-the-password").get(artifact)
    assert wrong_password.value.status == 401
    assert _as("reader").get(artifact)["artifactId"] == "OrdenCancelada"
