"""Each schema version a service produces (the relay, once Kafka acknowledged the record) or
consumes (a record handled, or found a duplicate) is counted in
``saga_schema_version_in_use_total{event,version,service}`` and remembered with the time of its
last use; one that the registry marks deprecated is logged as a warning, at most once per
``SAGA_SCHEMA_WARNING_INTERVAL_S`` for each version, with the count since the last warning.

Only versions the contracts define are counted: the version in a record's envelope is the
sender's word, and taken as it came each new value would be a new series without bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Literal

from prometheus_client import Counter, Gauge

from saga_contracts import registry

log = logging.getLogger("sagakit.schema_versions")

Use = Literal["produced", "consumed"]
Version = tuple[str, str]
"""(event type, schema version)."""

SCHEMA_VERSION_IN_USE = Counter(
    "saga_schema_version_in_use",
    "Events of each schema version this service produced (published, acknowledged by Kafka) "
    "or consumed (handled, duplicates included): the use of a version, deprecated or not",
    ["event", "version", "service"],
)
SCHEMA_VERSION_DEPRECATED = Gauge(
    "saga_schema_version_deprecated",
    "1 for each schema version the schema registry marks deprecated, as this service last "
    "learned it (SCHEMA_REGISTRY_URL); 0 once it is no longer",
    ["event", "version", "service"],
)


def known_version(event_type: str, version: str) -> bool:
    return any(s.version == version for s in registry.all_schemas().get(event_type, ()))


class SchemaVersionUse:
    def __init__(self, warning_interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.warning_interval_s = warning_interval_s
        self._clock = clock
        self._now = now
        self.deprecated: frozenset[Version] = frozenset()
        self.last_seen: dict[tuple[str, str, Use], datetime] = {}
        """(event type, version, use) → last use, since the last ``take_last_seen``."""
        self._warned_at: dict[tuple[str, str, Use], float] = {}
        self._since_warning: dict[tuple[str, str, Use], int] = {}

    def produced(self, service: str, event_type: str, version: str) -> None:
        self._seen(service, event_type, version, "produced")

    def consumed(self, service: str, event_type: str, version: str) -> None:
        self._seen(service, event_type, version, "consumed")

    def _seen(self, service: str, event_type: str, version: str, use: Use) -> None:
        if not known_version(event_type, version):
            return
        SCHEMA_VERSION_IN_USE.labels(event_type, version, service).inc()
        key = (event_type, version, use)
        self.last_seen[key] = self._now()
        if (event_type, version) in self.deprecated:
            self._warn(service, key)

    def _warn(self, service: str, key: tuple[str, str, Use]) -> None:
        count = self._since_warning.get(key, 0) + 1
        warned = self._warned_at.get(key)
        if warned is not None and self._clock() - warned < self.warning_interval_s:
            self._since_warning[key] = count
            return
        self._warned_at[key], self._since_warning[key] = self._clock(), 0
        event_type, version, use = key
        log.warning("%s a deprecated schema version: %s %s (%d since the last warning); "
                    "move to its successor before it is retired", use, event_type, version,
                    count, extra={"service": service, "event_type": event_type,
                                  "schema_version": version})

    def mark_deprecated(self, service: str, versions: Iterable[Version]) -> None:
        """What the registry now marks deprecated (of the versions the contracts define)."""
        now = frozenset(v for v in versions if known_version(*v))
        for event_type, version in self.deprecated - now:
            SCHEMA_VERSION_DEPRECATED.labels(event_type, version, service).set(0)
        for event_type, version in now:
            SCHEMA_VERSION_DEPRECATED.labels(event_type, version, service).set(1)
        if now - self.deprecated:
            log.info("the schema registry marks deprecated: %s",
                     ", ".join(f"{e} {v}" for e, v in sorted(now - self.deprecated)),
                     extra={"service": service})
        self.deprecated = now

    def take_last_seen(self) -> dict[tuple[str, str, Use], datetime]:
        """The last uses since the previous call, forgotten here (to be written down)."""
        taken, self.last_seen = self.last_seen, {}
        return taken


SCHEMA_USE = SchemaVersionUse()
"""The process's: every service of a process shares the metric, as it shares the registry of
metrics."""
