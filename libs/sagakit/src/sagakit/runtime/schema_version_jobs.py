"""The periodic jobs of the schema versions' use (``sagakit.schema_versions``), which every
instance of a service runs: its last uses written down, and what the registry marks deprecated
learned (when it is named)."""

from __future__ import annotations

from sagakit.runtime.service import PeriodicJob, Runtime
from sagakit.schema_registry.settings import SchemaRegistrySettings
from sagakit.schema_versions.deprecations import SchemaVersionSettings, learn_deprecations
from sagakit.schema_versions.last_seen import write_last_seen
from sagakit.schema_versions.use import SCHEMA_USE


def schema_version_jobs(settings: SchemaVersionSettings,
                        registry: SchemaRegistrySettings) -> list[PeriodicJob]:
    SCHEMA_USE.warning_interval_s = settings.schema_warning_interval_s

    async def flush(rt: Runtime) -> None:
        await write_last_seen(rt.engine, rt.tables.schema)

    async def learn(rt: Runtime) -> None:
        await learn_deprecations(rt.name, registry)

    jobs = [PeriodicJob("schema-version-use", settings.schema_use_flush_s, flush)]
    if registry.url:
        jobs.append(PeriodicJob("schema-deprecations", settings.schema_deprecations_interval_s,
                                learn))
    return jobs
