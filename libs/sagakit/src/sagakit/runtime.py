"""The composition root shared by the services: engine, relay, consumer, periodic jobs, and the
operational endpoints (/health, /ready, /metrics), all built in the FastAPI lifespan.

A service supplies its name, tables, the topics it reads, its handlers, its routers and its
periodic jobs; nothing is built at import time, so tests can build as many apps as they need.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from sagakit import gc_tuning, inbox, metrics, tracing
from sagakit.conflicts import StillConflicting
from sagakit.consumer import EventConsumer, Handler
from sagakit.database import build_engine
from sagakit.errors import CommitOutcomeUnknown, is_connection_failure
from sagakit.relay import OutboxRelay
from sagakit.settings import MessagingSettings, load
from sagakit.tables import MessagingTables
from sagakit.unit_of_work import SharedTransaction, UnitOfWork

log = logging.getLogger("sagakit.runtime")


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore")

    service_name: str = Field("service", validation_alias="SERVICE_NAME", description=(
        "Not used: each service's name is fixed in its code (the local stack sets it anyway)."))
    http_host: str = Field("127.0.0.1", validation_alias="HTTP_HOST", description=(
        "Address the service's HTTP server listens on."))
    http_port: int = Field(8000, validation_alias="HTTP_PORT", description=(
        "Port of the service's HTTP server: its API, /health, /ready and /metrics."))
    database_url: str = Field(..., validation_alias="DATABASE_URL", description=(
        "SQLAlchemy URL of the service's PostgreSQL database "
        "(postgresql+asyncpg://user:password@host:port/database), as the service's application "
        "role; its migrations read the same variable, as the schema's owner role."))
    db_pool_size: int = Field(20, ge=1, validation_alias="DB_POOL_SIZE", description=(
        "Connections in the service's pool, with no overflow: past this many units of work at "
        "once, the next waits for a connection."))
    log_level: str = Field("INFO", validation_alias="LOG_LEVEL", description=(
        "Level of the service's JSON log lines (DEBUG, INFO, WARNING, ERROR)."))
    # How long an idle keep-alive connection stays open. It must outlast the idle expiry of
    # every client and proxy in front (httpx 5 s, aiohttp 15 s, nginx and cloud load balancers
    # 60 s): when both ends give up at the same moment, a request sent on a connection the
    # server is closing is lost with "server disconnected" (uvicorn's default is 5 s, the same
    # as httpx's expiry; tests/e2e/test_keep_alive.py).
    http_keep_alive_s: int = Field(75, ge=1, validation_alias="HTTP_KEEP_ALIVE_S", description=(
        "How long an idle keep-alive HTTP connection stays open; longer than every client and "
        "proxy in front keeps one."))
    run_consumer: bool = Field(True, validation_alias="RUN_CONSUMER", description=(
        "Whether this instance runs the Kafka consumer (the event handlers); without it, "
        "/ready does not check Kafka."))
    run_relay: bool = Field(True, validation_alias="RUN_RELAY", description=(
        "Whether this instance runs an outbox relay; of several instances' relays, one "
        "publishes at a time."))
    run_jobs: bool = Field(True, validation_alias="RUN_JOBS", description=(
        "Whether this instance runs the periodic jobs: outbox and inbox cleanup, gauges, and "
        "the service's own (pedidos' deadline scanner, pagos' gateway worker)."))
    # Container allocations between two collections of the youngest generation, once the
    # service has started (sagakit.gc_tuning); 0 leaves CPython's collector as it is.
    gc_gen0_threshold: int = Field(10_000, ge=0, validation_alias="GC_GEN0_THRESHOLD", description=(
        "Allocations between two collections of CPython's youngest generation once the service "
        "has started; 0 leaves CPython's default."))


@dataclass
class Runtime:
    name: str
    engine: AsyncEngine
    tables: MessagingTables
    settings: MessagingSettings
    service_settings: ServiceSettings
    relay: OutboxRelay
    consumer: EventConsumer | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def uow(self, isolation_level: str | None = None,
            reads_outside_transaction: bool = False) -> UnitOfWork:
        return UnitOfWork(self.engine, self.tables, self.name, isolation_level=isolation_level,
                          reads_outside_transaction=reads_outside_transaction,
                          signal=self.relay.signal)

    def shared_transaction(self) -> SharedTransaction:
        return SharedTransaction(self.engine, self.tables, self.name,
                                 self.settings.consumer_batch_lock_timeout_ms,
                                 signal=self.relay.signal)


@dataclass(frozen=True)
class RunAgainIn:
    """What a periodic job may return: when its next work falls due, if sooner than its
    interval (a job that reads deadlines from a table knows the earliest one)."""

    seconds: float


@dataclass(frozen=True)
class PeriodicJob:
    """Runs ``run`` every ``interval_s``, or sooner when it returns ``RunAgainIn``."""

    name: str
    interval_s: float
    run: Callable[[Runtime], Awaitable[Any]]


@dataclass
class ServiceDefinition:
    name: str
    tables: MessagingTables
    topics: list[str]
    make_handlers: Callable[[Runtime], dict[str, Handler]]
    routers: list[APIRouter]
    jobs: list[PeriodicJob] = field(default_factory=list)
    on_start: Callable[[Runtime], Awaitable[None]] | None = None
    on_stop: Callable[[Runtime], Awaitable[None]] | None = None
    description: str = ""
    compensation_reasons: list[str] = field(default_factory=list)
    database_settings: Callable[[], dict[str, str]] = dict
    """PostgreSQL settings for every connection of the service (``statement_timeout``...),
    read when the service starts."""


def messaging_jobs(settings: MessagingSettings) -> list[PeriodicJob]:
    async def gauges(rt: Runtime) -> None:
        await rt.relay.refresh_gauges()
        await inbox.refresh_dead_letter_gauge(rt.engine, rt.tables, rt.name)
        if rt.consumer:
            # Asking Kafka can hang while it is down; the other gauges must go on meanwhile.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(rt.consumer.refresh_lag(), 1.5)

    async def cleanup(rt: Runtime) -> None:
        outbox_rows = await rt.relay.cleanup()
        inbox_rows = await inbox.cleanup_processed(rt.engine, rt.tables,
                                                   settings.inbox_retention_days,
                                                   settings.cleanup_batch_size)
        if outbox_rows or inbox_rows:
            log.info("cleanup removed %s outbox and %s inbox rows", outbox_rows, inbox_rows)

    return [PeriodicJob("messaging-gauges", 5.0, gauges),
            PeriodicJob("messaging-cleanup", settings.cleanup_interval_s, cleanup)]


async def _run_periodic(job: PeriodicJob, rt: Runtime, stop: asyncio.Event) -> None:
    while not stop.is_set():
        wait_s = job.interval_s
        try:
            result = await job.run(rt)
            if isinstance(result, RunAgainIn):
                wait_s = min(wait_s, max(0.0, result.seconds))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("periodic job %s failed", job.name, exc_info=True)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), wait_s)


def create_app(definition: ServiceDefinition) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        svc = load(ServiceSettings)
        msg = load(MessagingSettings)
        engine = build_engine(svc.database_url, definition.name, svc.db_pool_size,
                              server_settings=definition.database_settings())
        relay = OutboxRelay(engine, definition.tables, definition.name, msg)
        rt = Runtime(definition.name, engine, definition.tables, msg, svc, relay)
        handlers = definition.make_handlers(rt) if definition.topics else {}
        if definition.topics:
            rt.consumer = EventConsumer(service=definition.name, topics=definition.topics,
                                        handlers=handlers, uow_factory=rt.uow, settings=msg,
                                        shared_transaction=rt.shared_transaction)
        metrics.initialise(definition.name, sorted(handlers), definition.compensation_reasons)
        app.state.runtime = rt
        if definition.on_start:
            await definition.on_start(rt)
        stop = asyncio.Event()
        tasks = []
        if svc.run_relay:
            tasks.append(asyncio.create_task(relay.run(stop), name="relay"))
        if rt.consumer and svc.run_consumer:
            tasks.append(asyncio.create_task(rt.consumer.run(stop), name="consumer"))
        if svc.run_jobs:
            for job in [*messaging_jobs(msg), *definition.jobs]:
                tasks.append(asyncio.create_task(_run_periodic(job, rt, stop), name=job.name))
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
            await relay.close()
            await engine.dispose()

    app = FastAPI(title=definition.name, description=definition.description, lifespan=lifespan,
                  version="1.0.0")
    if tracing.configure(definition.name):
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, excluded_urls="health,ready,metrics")
    install_database_error_handlers(app)
    install_request_validation_handler(app)
    app.include_router(operational_router())
    for router in definition.routers:
        app.include_router(router)
    return app


def install_database_error_handlers(app: FastAPI) -> None:
    """503 + Retry-After when the database is unreachable, telling apart a request that failed
    before its COMMIT (nothing was done) from one whose COMMIT was in flight (unknown)."""
    @app.exception_handler(DBAPIError)
    @app.exception_handler(asyncpg.InterfaceError)  # from the unit of work's commit statement
    @app.exception_handler(asyncpg.PostgresError)
    @app.exception_handler(OSError)
    async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
        if not is_connection_failure(exc):
            raise exc
        # Failed before COMMIT: nothing was committed; the client may simply retry.
        log.warning("request failed, database unavailable: %r", exc)
        return JSONResponse({"detail": "database unavailable, nothing was done; retry later"},
                            status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(CommitOutcomeUnknown)
    async def commit_in_doubt(request: Request, exc: Exception) -> JSONResponse:
        # The connection died with COMMIT in flight: the request may have taken effect.
        log.warning("request outcome unknown, connection lost during commit: %r", exc.__cause__)
        return JSONResponse({"detail": "database connection lost during commit: the request may "
                                       "or may not have taken effect; retry with the same "
                                       "Idempotency-Key to learn which"},
                            status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(StillConflicting)
    async def still_conflicting(request: Request, exc: Exception) -> JSONResponse:
        # Rolled back every time by PostgreSQL (sagakit.conflicts): nothing was done.
        log.warning("request lost every race it was retried in: %s", exc)
        return JSONResponse({"detail": "the request collided with concurrent changes and "
                                       "nothing was done; retry"},
                            status_code=503, headers={"Retry-After": "1"})


def install_request_validation_handler(app: FastAPI) -> None:
    """422 with every invalid field's location and input, whatever that input held.

    FastAPI's own handler echoes each invalid input into a strict JSON response, so an input
    that JSON cannot carry turned the 422 into a 500: ``NaN`` or ``Infinity`` (Python reads
    them in a request body) and a lone surrogate (``"\\ud800"``), which UTF-8 cannot encode.
    """
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422,
                            content={"detail": json_safe(jsonable_encoder(exc.errors()))})


def json_safe(value: Any) -> Any:
    """``value`` with what strict UTF-8 JSON cannot hold spelled out: a non-finite number as
    the token it was sent as, an unencodable character as its escape."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def runtime_of(request: Request) -> Runtime:
    return request.app.state.runtime


def operational_router() -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/ready")
    async def ready(request: Request) -> JSONResponse:
        rt = runtime_of(request)
        checks: dict[str, str] = {}
        try:
            async with rt.engine.connect() as conn:
                await asyncio.wait_for(conn.execute(text("SELECT 1")), 2)
            checks["database"] = "ok"
        except Exception as exc:
            checks["database"] = f"unreachable: {type(exc).__name__}"
        if rt.consumer is not None and rt.service_settings.run_consumer:
            checks["kafka"] = "ok" if rt.consumer.assigned.is_set() else "not connected"
        ok = all(v == "ok" for v in checks.values())
        return JSONResponse({"status": "ready" if ok else "not ready", "checks": checks},
                            status_code=200 if ok else 503)

    @router.get("/metrics")
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return router


def serve(app_factory: Callable[[], FastAPI], service: str) -> None:
    """Entry point of ``python -m <service>``."""
    from sagakit import http_server
    from sagakit.structured_logging import configure

    svc = load(ServiceSettings)
    configure(service, svc.log_level)
    started = time.monotonic()
    log.info("starting %s on %s:%s", service, svc.http_host, svc.http_port)
    http_server.run(app_factory(), host=svc.http_host, port=svc.http_port, log_config=None,
                    access_log=False, lifespan="on", timeout_graceful_shutdown=10,
                    timeout_keep_alive=svc.http_keep_alive_s,
                    loop="uvloop", http="httptools")
    log.info("%s stopped after %.0fs", service, time.monotonic() - started)
