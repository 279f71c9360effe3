"""``sagactl schemas deprecate|retire ARTIFACT [VERSION]``: the end of a schema version's life,
as the standard's deprecation policy has it (docs/operations.md#evolving-an-event-schema).

- **deprecate** sets the state of the artifact's versions (or of one) to ``DEPRECATED`` in the
  schema registry. The services learn it from there (``sagakit.schema_versions.deprecations``),
  log a warning when they produce or consume it, and ``saga_schema_version_deprecated`` tells
  the alert which versions' use to watch.
- **retire** sets them to ``DISABLED``: the registry keeps them but hands their content to no
  one. Only a deprecated version is retired, and only when no service produced or consumed it
  within the last ``SAGACTL_SCHEMA_RETIRE_UNUSED_DAYS`` days (30): each service writes when it
  last did in its ``<service>_read.schema_version_use_v1``, which this reads as sagactl's
  reader role. A version still in use is refused, naming who used it last and when.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from saga_contracts import topology
from saga_contracts.schema_artifacts import event_type_of
from sagactl.schema_registration import PAGE, artifact_path
from sagactl.schema_registry import RegistryApi

DEPRECATED = "DEPRECATED"
RETIRED = "DISABLED"
DEFAULT_UNUSED_DAYS = 30.0


class NotRetired(Exception):
    """A version retire refused: not deprecated first, or used within the window."""


@dataclass(frozen=True)
class Version:
    artifact: str
    version: str
    state: str


@dataclass(frozen=True)
class LastUse:
    service: str
    event_type: str
    version: str
    use: str
    last_seen_at: datetime


def versions_of(api: RegistryApi, group: str, artifact: str,
                version: str | None = None) -> tuple[str, list[Version]]:
    """The artifact's event type and its versions (or the one named), with their states."""
    meta = api.get(artifact_path(group, artifact))
    found = api.get(artifact_path(group, artifact, "versions"),
                    {"limit": str(PAGE), "order": "asc", "orderby": "createdOn"})
    versions = [Version(artifact, v["version"], v.get("state", "ENABLED"))
                for v in found.get("versions", [])]
    if version is not None:
        versions = [v for v in versions if v.version == version]
        if not versions:
            raise NotRetired(f"{artifact} has no version {version}")
    return event_type_of(artifact, meta.get("labels")), versions


def set_state(api: RegistryApi, group: str, version: Version, state: str) -> None:
    api.put(artifact_path(group, version.artifact, "versions", version.version, "state"),
            {"state": state})


def deprecate(api: RegistryApi, group: str, artifact: str,
              version: str | None = None) -> list[Version]:
    """Marks the versions deprecated; those retired stay retired. Returns them as they were."""
    _, versions = versions_of(api, group, artifact, version)
    for v in versions:
        if v.state not in (DEPRECATED, RETIRED):
            set_state(api, group, v, DEPRECATED)
    return versions


async def last_uses(conn: asyncpg.Connection, event_type: str, versions: Sequence[str],
                    services: Sequence[str] = topology.SERVICES) -> list[LastUse]:
    """Each service's last use of each of ``versions`` of ``event_type``, newest first."""
    uses: list[LastUse] = []
    for service in services:
        rows = await conn.fetch(
            f"SELECT event_type, schema_version, use, last_seen_at "
            f"FROM {service}_read.schema_version_use_v1 "
            f"WHERE event_type = $1 AND schema_version = ANY($2::text[])",
            event_type, list(versions))
        uses += [LastUse(service, r["event_type"], r["schema_version"], r["use"],
                         r["last_seen_at"]) for r in rows]
    return sorted(uses, key=lambda u: u.last_seen_at, reverse=True)


def check_retirable(versions: Sequence[Version], uses: Sequence[LastUse], now: datetime,
                    unused_days: float) -> None:
    """Raises ``NotRetired`` unless every one of ``versions`` is deprecated (or retired) and
    none was used within ``unused_days`` of ``now``."""
    active = [v for v in versions if v.state not in (DEPRECATED, RETIRED)]
    if active:
        raise NotRetired(
            "deprecate first (sagactl schemas deprecate), announce it, and retire once nothing "
            "uses it: " + ", ".join(f"{v.artifact} {v.version} is {v.state}" for v in active))
    since = now - timedelta(days=unused_days)
    recent = [u for u in uses if u.last_seen_at > since]
    if recent:
        raise NotRetired(
            f"still in use within the last {unused_days:g} days: " + "; ".join(
                f"{u.service} {u.use} {u.event_type} {u.version} at "
                f"{u.last_seen_at.isoformat(timespec='seconds')}" for u in recent))


async def retire(api: RegistryApi, conn: asyncpg.Connection, group: str, artifact: str,
                 version: str | None, unused_days: float) -> tuple[list[Version], list[LastUse]]:
    """Retires the versions, or raises ``NotRetired`` and retires none. Returns them as they
    were, and the last uses read."""
    event_type, versions = versions_of(api, group, artifact, version)
    uses = await last_uses(conn, event_type, [v.version for v in versions])
    now: datetime = await conn.fetchval("SELECT now()")
    check_retirable(versions, uses, now, unused_days)
    for v in versions:
        if v.state != RETIRED:
            set_state(api, group, v, RETIRED)
    return versions, uses


def as_json(versions: Sequence[Version], uses: Sequence[LastUse]) -> dict[str, Any]:
    return {"versions": [v.__dict__ for v in versions],
            "last_uses": [{**u.__dict__, "last_seen_at": u.last_seen_at.isoformat()}
                          for u in uses]}
