"""What the schema registry marks deprecated, learned by each service every
``SAGA_SCHEMA_DEPRECATIONS_INTERVAL_S``: the versions of the event group in the state
``DEPRECATED`` (Apicurio Registry's REST API v3, ``/search/versions``), as the principal the
service reads the registry as (``sagakit.schema_registry.SchemaRegistrySettings``).
``sagactl schemas deprecate`` sets that state; the services then count and warn
(``sagakit.schema_versions.use``). Without ``SCHEMA_REGISTRY_URL`` a service learns nothing and
warns about nothing; an unreachable registry leaves what it learned last, and says so in
``saga_schema_registry_reachable`` (0), so that the silence is seen: the alert
SchemaRegistryUnreachable (docs/operations.md#schemaregistryunreachable).
"""

from __future__ import annotations

import asyncio
import logging
from functools import cache

import httpx
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from saga_contracts.registry import all_schemas
from saga_contracts.schema_artifacts import artifact_id
from sagakit.observability import metrics
from sagakit.schema_registry.settings import SchemaRegistrySettings
from sagakit.schema_versions.use import SCHEMA_USE, SchemaVersionUse, Version

log = logging.getLogger("sagakit.schema_versions")

# Far more than there are versions: one page holds them all.
_PAGE = 1000
# The longest one question may take, whole: httpx's timeout bounds each read, and a server that
# sends a byte now and then would otherwise hold the periodic job, and the gauge, for ever.
_QUESTION_S = 15.0


class SchemaVersionSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAGA_", extra="ignore")

    schema_deprecations_interval_s: float = Field(60.0, gt=0, le=3600, description=(
        "How often the service asks the registry which schema versions are deprecated."))
    schema_warning_interval_s: float = Field(60.0, gt=0, le=86_400, description=(
        "At most one log warning per deprecated schema version produced or consumed in this "
        "long (with the count since the last)."))
    schema_use_flush_s: float = Field(60.0, gt=0, le=3600, description=(
        "How often the service writes down when it last produced and consumed each schema "
        "version (its `schema_version_use` table, read by `sagactl schemas retire`)."))


@cache
def _versions_of_artifacts() -> dict[tuple[str, str], Version]:
    """(artifact, version) → (event type, version), for every version of the contracts."""
    return {(artifact_id(event_type, s.version), s.version): (event_type, s.version)
            for event_type, versions in all_schemas().items() for s in versions}


def deprecated_versions(found: dict[str, object]) -> set[Version]:
    """The versions of the contracts in a ``/search/versions`` answer."""
    known = _versions_of_artifacts()
    out: set[Version] = set()
    versions = found.get("versions")
    for entry in versions if isinstance(versions, list) else []:
        if isinstance(entry, dict) and entry.get("state") == "DEPRECATED":
            key = (str(entry.get("artifactId")), str(entry.get("version")))
            if key in known:
                out.add(known[key])
    return out


async def fetch_deprecated(registry: SchemaRegistrySettings,
                           client: httpx.AsyncClient) -> set[Version]:
    password = registry.password
    auth = (httpx.BasicAuth(registry.username,
                            password.get_secret_value() if password else "")
            if registry.username else None)
    response = await client.get(
        f"{(registry.url or '').rstrip('/')}/search/versions",
        params={"groupId": registry.group, "state": "DEPRECATED", "limit": _PAGE}, auth=auth,
        timeout=10.0)
    response.raise_for_status()
    found = response.json()
    # Only the registry's answer says what is deprecated: any other JSON (a proxy's, another
    # API's) would otherwise forget what was learned, and be taken for an answer.
    if not isinstance(found, dict) or not isinstance(found.get("versions"), list):
        raise ValueError("not the registry's answer to /search/versions")
    return deprecated_versions(found)


async def learn_deprecations(service: str, registry: SchemaRegistrySettings,
                             use: SchemaVersionUse = SCHEMA_USE,
                             transport: httpx.AsyncBaseTransport | None = None) -> None:
    """Asks the registry (through ``transport``, else the network) and marks what it says."""
    reachable = metrics.SCHEMA_REGISTRY_REACHABLE.labels(service)
    try:
        async with asyncio.timeout(_QUESTION_S), httpx.AsyncClient(transport=transport) as client:
            found = await fetch_deprecated(registry, client)
    except (httpx.HTTPError, ValueError, TimeoutError) as exc:
        reachable.set(0)
        log.warning("cannot ask the schema registry which versions are deprecated: %s",
                    type(exc).__name__, extra={"service": service})
        return
    reachable.set(1)
    use.mark_deprecated(service, found)
