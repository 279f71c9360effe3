"""The composition root shared by the services: engine, relay, consumer and periodic jobs, built
in the FastAPI lifespan, with the operational endpoints and the error handlers; and ``serve``,
the entry point of ``python -m <service>``.

A service supplies its ``ServiceDefinition``: name, tables, subscriptions, routers, periodic
jobs; nothing is built at import time, so tests can build as many apps as they need.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI

from sagakit.auth import AuthSettings, TokenVerifier, install_authentication
from sagakit.consumer import EventConsumer, topics_of
from sagakit.observability import metrics, tracing
from sagakit.outbox.relay import OutboxRelay
from sagakit.runtime import gc_tuning
from sagakit.runtime.api_docs import operator_docs_router
from sagakit.runtime.dead_letters_api import dead_letter_router
from sagakit.runtime.http_errors import (
    install_database_error_handlers,
    install_request_validation_handler,
)
from sagakit.runtime.http_metrics import HttpMetricsMiddleware
from sagakit.runtime.jobs import messaging_jobs, run_periodic
from sagakit.runtime.operations import operational_router
from sagakit.runtime.schema_version_jobs import schema_version_jobs
from sagakit.runtime.service import Runtime, ServiceDefinition
from sagakit.runtime.settings import HttpLimits, ServiceSettings
from sagakit.schema_registry import SchemaRegistrySettings, open_schemas
from sagakit.schema_versions.deprecations import SchemaVersionSettings
from sagakit.schema_versions.last_seen import write_last_seen
from sagakit.settings import MessagingSettings, load
from sagakit.store.database import build_engine
from sagakit.store.reachability import Reachability

log = logging.getLogger("sagakit.runtime")


def create_app(definition: ServiceDefinition) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        svc = load(ServiceSettings)
        msg = load(MessagingSettings)
        engine = build_engine(svc.database_url, definition.name, svc.db_pool_size,
                              server_settings=definition.database_settings(),
                              idle_in_transaction_timeout_s=svc.db_idle_in_transaction_timeout_s)
        relay = OutboxRelay(engine, definition.tables, definition.name, msg,
                            instance=svc.instance())
        rt = Runtime(definition.name, engine, definition.tables, msg, svc, relay)
        subscriptions = definition.subscriptions(rt)
        topics = topics_of(subscriptions)
        if topics and svc.run_consumer and not (msg.operator_public_keys or "").strip():
            # Without the operator's keys no replay is believed: a consumer would handle every
            # replay on its topics as any record, whoever it was addressed to.
            raise SystemExit(f"[{definition.name}] SAGA_OPERATOR_PUBLIC_KEYS is empty: a "
                             "service that runs its consumer needs the operator's replay-"
                             "signing public keys (sagactl signing-key prints them)")
        # Before anything runs: a service whose produced versions are not registered does not
        # start, and the consumer validates against the registry's schemas, cached now.
        registry = load(SchemaRegistrySettings)
        schemas = await open_schemas(definition.name,
                                     [s.event_type for s in subscriptions], registry)
        reachability = None
        if topics:
            reachability = Reachability(engine.url, definition.name,
                                        lost_after_s=msg.consumer_database_lost_s)
            rt.consumer = EventConsumer(service=definition.name, topics=topics,
                                        subscriptions=subscriptions, uow_factory=rt.uow,
                                        settings=msg, shared_transaction=rt.shared_transaction,
                                        reachability=reachability, schemas=schemas)
        metrics.initialise(definition.name, sorted({s.event_type for s in subscriptions}),
                           definition.saga_types)
        if definition.metrics_at_zero:
            definition.metrics_at_zero(definition.name)
        app.state.runtime = rt
        verifier = TokenVerifier(load(AuthSettings))
        install_authentication(app, verifier)
        # The issuer's keys fetched before the first request needs them; an issuer not up
        # yet is asked again by the first request (sagakit.auth.issuer_keys).
        await verifier.keys.prefetch()
        if definition.on_start:
            await definition.on_start(rt)
        stop = asyncio.Event()
        tasks = []
        if svc.run_relay:
            tasks.append(asyncio.create_task(relay.run(stop), name="relay"))
        if rt.consumer and svc.run_consumer:
            tasks.append(asyncio.create_task(rt.consumer.run(stop), name="consumer"))
            if reachability is not None:
                tasks.append(asyncio.create_task(reachability.run(stop), name="reachability"))
        if svc.run_jobs:
            for job in [*messaging_jobs(msg), *definition.jobs]:
                tasks.append(asyncio.create_task(run_periodic(job, rt, stop), name=job.name))
        # Every instance's, whether it runs the jobs or not: each counts its own use.
        for job in schema_version_jobs(load(SchemaVersionSettings), registry):
            tasks.append(asyncio.create_task(run_periodic(job, rt, stop), name=job.name))
        gc_tuning.settle_heap(svc.gc_gen0_threshold)
        log.info("%s started", definition.name)
        try:
            yield
        finally:
            stop.set()
            _, pending = await asyncio.wait(tasks, timeout=10) if tasks else (set(), set())
            if pending:
                # Which part held the shutdown up: chaos runs saw 10-s shutdowns with Kafka just
                # back, and a restart's duration counts against every saga's deadline.
                log.warning("still running %ss after stop, cancelled: %s", 10,
                            ", ".join(sorted(t.get_name() for t in pending)))
            for t in pending:
                t.cancel()
            if definition.on_stop:
                await definition.on_stop(rt)
            with contextlib.suppress(Exception):  # the last uses counted, if it can
                await write_last_seen(engine, definition.tables.schema)
            await relay.close()
            await verifier.close()
            await schemas.close()
            await engine.dispose()

    # The HTML docs are served by operator_docs_router, behind an operator's token.
    limits = load(HttpLimits)
    app = FastAPI(title=definition.name, description=definition.description, lifespan=lifespan,
                  version="1.0.0", docs_url=None, redoc_url=None,
                  max_body_size=limits.http_max_body_bytes)
    if tracing.configure(definition.name):
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, excluded_urls="health,ready,metrics")
    # Inside the server-error handler: a request that raises counts as the 500 it gets.
    app.add_middleware(HttpMetricsMiddleware, service=definition.name)
    install_database_error_handlers(app)
    install_request_validation_handler(app)
    app.include_router(operational_router(limits.ready_cache_s))
    app.include_router(dead_letter_router())
    app.include_router(operator_docs_router(definition.name))
    for router in definition.routers:
        app.include_router(router)
    return app


def http_server_options(svc: ServiceSettings) -> dict[str, Any]:
    """How ``serve`` runs uvicorn (``sagakit.runtime.http_server.run``'s keyword arguments)."""
    return {"host": svc.http_host, "port": svc.http_port, "log_config": None,
            "access_log": False, "lifespan": "on", "timeout_graceful_shutdown": 10,
            "timeout_keep_alive": svc.http_keep_alive_s,
            "header_timeout_s": svc.http_header_timeout_s,
            # Past this many connections or requests at once, uvicorn answers 503 at once
            # rather than queueing work the database pool would make wait anyway.
            "limit_concurrency": svc.http_limit_concurrency, "loop": "uvloop"}


def serve(app_factory: Callable[[], FastAPI], service: str) -> None:
    """Entry point of ``python -m <service>``."""
    from sagakit.observability import metrics_server
    from sagakit.observability.structured_logging import configure
    from sagakit.runtime import http_server

    svc = load(ServiceSettings)
    configure(service, svc.log_level)
    started = time.monotonic()
    log.info("starting %s on %s:%s", service, svc.http_host, svc.http_port)
    try:
        metrics_server.start(svc.metrics_host, svc.metrics_port)
    except OSError as exc:
        # As uvicorn does for its own port: one log line, and the process ends.
        log.critical("cannot serve the metrics on %s:%s: %s", svc.metrics_host,
                     svc.metrics_port, exc)
        raise SystemExit(1) from None
    http_server.run(app_factory(), **http_server_options(svc))
    log.info("%s stopped after %.0fs", service, time.monotonic() - started)
