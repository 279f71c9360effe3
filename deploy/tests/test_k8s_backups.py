"""The default overlay backs the payments database up (components/backups): the Cluster archives
its WAL through the Barman Cloud plugin into an ObjectStore that exists, a ScheduledBackup takes
base backups with that plugin, and what the user must fill in is a placeholder that says so. The
kind overlay, which has no object storage, has none of it."""

from __future__ import annotations

from typing import Any

import pytest

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
