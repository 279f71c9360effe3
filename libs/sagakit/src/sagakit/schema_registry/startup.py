"""A service's schemas at its start: from the registry when SCHEMA_REGISTRY_URL is set, the
cache warmed for every event type it handles or produces, and the start refused unless every
version it produces is registered, as this code writes it.

The versions a service produces are the ones ``sagakit.event_builder.build_event`` writes: the
latest version of every event type whose schema names the service as its producer.

A deployment registers the schemas beside the services' start (``sagactl schemas register``),
so a missing version, or a registry not answering yet, is asked again until
SCHEMA_REGISTRY_START_TIMEOUT_S has passed; then the service stops with a message naming what
is missing. The credentials never appear in a message or a log line."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from saga_contracts.registry import EventSchema, all_schemas
from sagakit.schema_registry.client import RegistryClient, RegistryReads, RegistryUnavailable
from sagakit.schema_registry.schemas import Schemas
from sagakit.schema_registry.settings import SchemaRegistrySettings

log = logging.getLogger("sagakit.schema_registry")

ASK_AGAIN_S = 2.0


class RefusedToStart(SystemExit):
    pass


def produced_by(service: str) -> list[EventSchema]:
    """The versions ``service`` writes: the latest of each event type it is the producer of."""
    return [versions[-1] for versions in all_schemas().values()
            if versions[-1].producer == service]


async def open_schemas(service: str, handled: Iterable[str], settings: SchemaRegistrySettings,
                       client: Callable[[SchemaRegistrySettings], RegistryReads] = RegistryClient
                       ) -> Schemas:
    if settings.url is None:
        log.warning("SCHEMA_REGISTRY_URL is not set: %s validates events against the schemas "
                    "of the contracts' package, and nothing checks that the versions it "
                    "produces are registered", service, extra={"service": service})
        return Schemas.from_package(service)
    produced = produced_by(service)
    schemas = Schemas(service, client(settings))
    deadline = time.monotonic() + settings.start_timeout_s
    while True:
        try:
            await schemas.warm({*handled, *(s.event_type for s in produced)})
            problems = schemas.unregistered(produced)
        except RegistryUnavailable as exc:
            problems = [str(exc)]
        if not problems:
            break
        if time.monotonic() >= deadline:
            await schemas.close()
            raise RefusedToStart(
                f"[{service}] refusing to start: every version it produces must be in "
                f"{schemas.where} as this code writes it, and after "
                f"{settings.start_timeout_s:g}s: {'; '.join(problems)}. Register them "
                "(sagactl schemas register), or deploy the code of the registered versions.")
        log.warning("waiting for the schema registry: %s", "; ".join(problems),
                    extra={"service": service})
        await asyncio.sleep(min(ASK_AGAIN_S, max(0.0, deadline - time.monotonic())))
    log.info("%d schema versions cached from %s; %d produced, all registered", len(schemas),
             schemas.where, len(produced), extra={"service": service})
    return schemas
