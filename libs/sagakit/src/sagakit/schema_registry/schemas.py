"""The event schemas a service validates against: the registry's, cached.

With a registry (``RegistryReads``), the cache is filled at the start (``warm``: every version
the registry holds of every event type the service handles or produces) and read on the hot
path as a dict look-up returning the compiled validator (``cached``). The registry is asked
again only for a version the cache lacks (``resolve``), once: records waiting for the same
version share the request, each request is bounded by the client's timeout, and after one that
failed the registry is not asked again for a backoff (1 s doubling to 30 s), so a registry
that hangs or is down costs a partition one timeout per backoff at most, never a stall.

What a version the cache lacks comes to:
- the registry holds it: its schema, cached from then on;
- the registry answers that it does not (404): ``UnknownSchema`` (remembered for
  ``MISSING_TTL_S``: the operator may register it and replay the letter);
- the registry cannot be asked: the contracts' package's newest schema of the same MAJOR, if
  it has one (the registry's FORWARD rule makes every schema of a MAJOR read the later
  versions' payloads, as a consumer built before them does), not cached; else
  ``UnknownSchema``.

The registry is the authority: a registered schema that differs from the package's for the
same version is the one used, logged and counted (``saga_schema_registry_mismatches_total``);
a service refuses to start when a version it produces is missing or differs
(``sagakit.schema_registry.startup``).

Without a registry (``Schemas.from_package``) the package's schemas are used as before: a
version is validated against the newest schema of its MAJOR.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from saga_contracts import registry
from saga_contracts.registry import EventSchema, UnknownEventType, parse_version
from saga_contracts.schema_artifacts import artifact_id
from sagakit.backoff import Backoff
from sagakit.observability import metrics
from sagakit.schema_registry.client import RegistryReads, RegistryUnavailable

log = logging.getLogger("sagakit.schema_registry")

# A version (or an artifact) the registry said it does not hold is not asked for again for this
# long: a flood of records of it costs one request, and one registered since is found soon.
MISSING_TTL_S = 10.0
REGISTRY_BACKOFF = Backoff(initial_s=1.0, factor=2.0, cap_s=30.0, jitter=0.0)


class UnknownSchema(LookupError):
    """A version of an event type that the registry does not hold (or, the registry not
    answering, that neither it nor the contracts' package could give)."""


@dataclass(frozen=True)
class Schema:
    event_type: str
    version: str
    document: dict[str, Any]
    validate: Callable[[Any], None]
    """Raises ``saga_contracts.registry.SchemaViolation`` for a payload the schema refuses."""
    source: str
    """``registry`` or ``package``."""


def _major(version: str) -> int | None:
    try:
        return parse_version(version)[0]
    except ValueError:
        return None


def _package_schema(event_type: str, version: str) -> Schema:
    """The package's newest schema of ``version``'s MAJOR (raises ``UnknownEventType``)."""
    found = registry.schema_for(event_type, version)
    return Schema(event_type, version, found.document,
                  partial(registry.validate, event_type, version), "package")


def _package_exact(event_type: str, version: str) -> EventSchema | None:
    return next((s for s in registry.all_schemas().get(event_type, [])
                 if s.version == version), None)


class Schemas:
    def __init__(self, service: str, client: RegistryReads | None) -> None:
        self.service = service
        self.client = client
        self._cache: dict[tuple[str, str], Schema] = {}
        self._artifacts: set[str] = set()
        """Artifacts the registry holds, as far as this service asked."""
        self._no_artifact: dict[str, float] = {}
        """Artifacts the registry said it does not hold, and until when that is believed."""
        self._missing: dict[tuple[str, str], float] = {}
        """Versions the registry said it does not hold, and until when that is believed."""
        self._in_flight: dict[tuple[str, str], asyncio.Future[Schema | None]] = {}
        self._failures = 0
        self._quiet_until = 0.0
        for when in ("start", "miss"):
            for outcome in ("found", "missing", "unavailable"):
                metrics.SCHEMA_FETCHES.labels(service, when, outcome)

    @classmethod
    def from_package(cls, service: str) -> Schemas:
        return cls(service, None)

    @property
    def where(self) -> str:
        return self.client.where if self.client is not None else "the contracts' package"

    def __len__(self) -> int:
        return len(self._cache)

    # ---------------------------------------------------------------- hot path

    def cached(self, event_type: str, version: str) -> Schema | None:
        return self._cache.get((event_type, version))

    async def resolve(self, event_type: str, version: str) -> Schema:
        """The schema to validate ``version`` of ``event_type`` against (see the module's
        docstring); raises ``UnknownSchema``, or, without a registry, ``UnknownEventType``."""
        key = (event_type, version)
        found = self._cache.get(key)
        if found is not None:
            return found
        if self.client is None:
            found = self._cache[key] = _package_schema(event_type, version)
            return found
        if _major(version) is None:
            raise UnknownSchema(f"{event_type} with malformed schema_version {version!r}")
        if self._missing.get(key, 0.0) > time.monotonic():
            raise UnknownSchema(f"{event_type} {version} is not in {self.where}")
        fetched = await self._fetch_once(event_type, version)
        if fetched is not None:
            return fetched
        # The registry could not be asked: the package's MAJOR, which reads the version.
        try:
            fallback = _package_schema(event_type, version)
        except UnknownEventType:
            raise UnknownSchema(f"{event_type} {version}: {self.where} did not answer and the "
                                "contracts' package has no schema of its MAJOR") from None
        log.warning("schema %s %s validated against the package's %s: the registry did not "
                    "answer", event_type, version, fallback.document.get("$id", "schema"),
                    extra={"service": self.service, "event_type": event_type,
                           "schema_version": version})
        return fallback

    async def knows(self, event_type: str, version: str) -> bool:
        """Whether the event type (at ``version``'s MAJOR) exists for the contracts' package or
        the registry: a record of a type this service does not handle is skipped when it does,
        dead-lettered as ``unknown_event_type`` when neither knows it. A registry that does
        not answer is taken to know it (skipping it harms no one)."""
        try:
            registry.schema_for(event_type, version)
            return True
        except UnknownEventType:
            pass
        if self.client is None or _major(version) is None:
            return False
        artifact = artifact_id(event_type, version)
        if artifact in self._artifacts:
            return True
        now = time.monotonic()
        if self._no_artifact.get(artifact, 0.0) > now:
            return False
        if self._quiet_until > now:
            return True
        try:
            held = await self.client.versions(artifact) is not None
        except RegistryUnavailable as exc:
            self._failed(exc)
            return True
        if held:
            self._artifacts.add(artifact)
        else:
            self._no_artifact[artifact] = now + MISSING_TTL_S
        return held

    async def _fetch_once(self, event_type: str, version: str) -> Schema | None:
        """The registry's schema, fetched by one request however many records wait for it;
        None when the registry cannot be asked."""
        key = (event_type, version)
        waiting = self._in_flight.get(key)
        if waiting is not None:
            return await asyncio.shield(waiting)
        if self._quiet_until > time.monotonic():
            return None
        future: asyncio.Future[Schema | None] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            result = await self._fetch(event_type, version, "miss")
        except BaseException as exc:
            future.set_exception(exc)
            # Retrieved here so an unawaited future does not warn; the waiters get it too.
            future.exception()
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self._in_flight[key]

    async def _fetch(self, event_type: str, version: str, when: str) -> Schema | None:
        assert self.client is not None
        artifact = artifact_id(event_type, version)
        try:
            document = await self.client.document(artifact, version)
        except RegistryUnavailable as exc:
            metrics.SCHEMA_FETCHES.labels(self.service, when, "unavailable").inc()
            self._failed(exc)
            if when == "start":
                raise
            return None
        self._failures = 0
        if document is None:
            metrics.SCHEMA_FETCHES.labels(self.service, when, "missing").inc()
            self._missing[(event_type, version)] = time.monotonic() + MISSING_TTL_S
            raise UnknownSchema(f"{event_type} {version} is not in {self.where} "
                                f"(artifact {artifact})")
        metrics.SCHEMA_FETCHES.labels(self.service, when, "found").inc()
        return self._keep(event_type, version, document)

    def _failed(self, exc: RegistryUnavailable) -> None:
        self._failures += 1
        delay = REGISTRY_BACKOFF.delay(self._failures)
        self._quiet_until = time.monotonic() + delay
        log.warning("schema registry unavailable, not asked again for %.1fs: %s", delay, exc,
                    extra={"service": self.service})

    def _keep(self, event_type: str, version: str, document: dict[str, Any]) -> Schema:
        packaged = _package_exact(event_type, version)
        if packaged is not None and packaged.document != document:
            metrics.SCHEMA_MISMATCHES.labels(self.service, event_type, version).inc()
            log.warning("the registry's schema of %s %s differs from the contracts' package's: "
                        "the registry's is used", event_type, version,
                        extra={"service": self.service, "event_type": event_type,
                               "schema_version": version})
        try:
            check = registry.compile_validator(event_type, version, document)
        except Exception as exc:  # a document that is no schema is no version of it
            raise UnknownSchema(f"{event_type} {version} in {self.where} is not a usable JSON "
                                f"Schema: {exc}") from None
        schema = self._cache[(event_type, version)] = Schema(event_type, version, document,
                                                            check, "registry")
        return schema

    # ---------------------------------------------------------------- start

    async def warm(self, event_types: Iterable[str]) -> None:
        """Caches every version the registry holds of ``event_types`` (for each MAJOR the
        package knows; a later MAJOR is fetched when a record brings one). Raises
        ``RegistryUnavailable``."""
        if self.client is None:
            return
        for event_type in sorted(set(event_types)):
            majors = {s.major: s.version for s in registry.all_schemas().get(event_type, [])}
            for some_version in majors.values():
                artifact = artifact_id(event_type, some_version)
                versions = await self.client.versions(artifact)
                if versions is not None:
                    self._artifacts.add(artifact)
                for version in versions or []:
                    if (event_type, version) in self._cache:
                        continue
                    try:
                        await self._fetch(event_type, version, "start")
                    except UnknownSchema as exc:  # gone since it was listed, or unusable
                        log.warning("%s", exc, extra={"service": self.service})

    def unregistered(self, produced: Iterable[EventSchema]) -> list[str]:
        """Why each of ``produced`` (versions this service writes) may not be published: not
        in the registry, or registered with another schema. Call after ``warm``."""
        problems = []
        for schema in produced:
            held = self._cache.get((schema.event_type, schema.version))
            artifact = artifact_id(schema.event_type, schema.version)
            if held is None:
                problems.append(f"{schema.event_type} {schema.version} (artifact {artifact}) "
                                "is not registered")
            elif held.document != schema.document:
                problems.append(f"{schema.event_type} {schema.version} (artifact {artifact}) "
                                "is registered with another schema than this code's")
        return problems

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
