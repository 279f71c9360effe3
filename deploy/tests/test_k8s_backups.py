"""The default overlay backs the payments database up (components/backups): the Cluster archives
its WAL through the Barman Cloud plugin into an ObjectStore that exists, a ScheduledBackup takes
base backups with that plugin, and what the user must fill in is a placeholder that says so. The
kind overlay, which has no object storage, has none of it."""

from __future__ import annotations

import copy
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = "barman-cloud.cloudnative-pg.io"


def _of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.external
def test_the_default_overlay_archives_wal_and_schedules_base_backups(
        default_overlay: list[dict[str, Any]]) -> None:
    cluster = _of(default_overlay, "Cluster")[0]
    archivers = [p for p in cluster["spec"].get("plugins", []) if p.get("isWALArchiver")]
    assert [p["name"] for p in archivers] == [PLUGIN]
    stores = {o["metadata"]["name"]: o for o in _of(default_overlay, "ObjectStore")}
    store = stores[archivers[0]["parameters"]["barmanObjectName"]]
    # Point-in-time recovery reaches back as far as the retention keeps base backups.
    assert store["spec"]["retentionPolicy"].endswith("d")
    config = store["spec"]["configuration"]
    assert "REPLACE-WITH-YOUR-BUCKET" in config["destinationPath"]
    assert not config.get("serverName"), "the plugin wants serverName left empty in the store"
    scheduled = _of(default_overlay, "ScheduledBackup")
    assert len(scheduled) == 1
    spec = scheduled[0]["spec"]
    assert spec["cluster"]["name"] == cluster["metadata"]["name"]
    assert spec["method"] == "plugin" and spec["pluginConfiguration"]["name"] == PLUGIN
    assert len(spec["schedule"].split()) == 6  # CloudNativePG's cron has seconds first


@pytest.mark.external
def test_the_kind_overlay_has_no_backups(every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    kind = every_overlay["kind"]
    assert not _of(kind, "ObjectStore") and not _of(kind, "ScheduledBackup")
    assert "plugins" not in _of(kind, "Cluster")[0]["spec"]


def _recovery_fields() -> dict[str, Any]:
    """The fields docs/deploy.md's drill changes in the overlay's Cluster to restore it."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    found = [yaml.safe_load(textwrap.dedent(b)) for b in blocks if "saga-db-pitr" in b]
    assert len(found) == 1, "docs/deploy.md's recovery Cluster not found"
    return found[0]


@pytest.mark.external
def test_the_documented_recovery_cluster_is_a_valid_cluster(
        default_overlay: list[dict[str, Any]]) -> None:
    cluster = copy.deepcopy(_of(default_overlay, "Cluster")[0])
    fields = _recovery_fields()
    cluster["metadata"]["name"] = fields["metadata"]["name"]
    cluster["spec"].update(fields["spec"])  # bootstrap, externalClusters, plugins replaced
    recovery = cluster["spec"]["bootstrap"]["recovery"]
    assert recovery["recoveryTarget"]["targetTime"]
    source = next(c for c in cluster["spec"]["externalClusters"]
                  if c["name"] == recovery["source"])
    # It reads the old cluster's folder of the store the overlay archives into, and archives
    # into a folder of its own there.
    stores = {o["metadata"]["name"] for o in _of(default_overlay, "ObjectStore")}
    assert source["plugin"]["parameters"]["barmanObjectName"] in stores
    assert source["plugin"]["parameters"]["serverName"] == "saga-db"
    archiver = cluster["spec"]["plugins"][0]["parameters"]
    assert archiver["serverName"] == cluster["metadata"]["name"] != "saga-db"
    schema = json.loads((ROOT / "deploy/k8s/schemas/crds.json").read_text())
    validator = jsonschema.Draft7Validator(schema["postgresql.cnpg.io/v1/Cluster"])
    assert [e.message for e in validator.iter_errors(cluster)] == []
