"""The settings of a service's process: its HTTP server, database pool, log level, and which of
its parts this instance runs. The messaging limits are ``sagakit.settings.MessagingSettings``."""

from __future__ import annotations

import socket

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from sagakit.store.database import IDLE_IN_TRANSACTION_TIMEOUT_S


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore")

    service_name: str = Field("service", validation_alias="SERVICE_NAME", description=(
        "Not used: each service's name is fixed in its code (the local stack sets it anyway)."))
    http_host: str = Field("127.0.0.1", validation_alias="HTTP_HOST", description=(
        "Address the service's HTTP server listens on."))
    http_port: int = Field(8000, validation_alias="HTTP_PORT", description=(
        "Port of the service's HTTP server: its API, /health, /ready and /metrics."))
    metrics_host: str = Field("127.0.0.1", validation_alias="METRICS_HOST", description=(
        "Address the metrics-only HTTP server listens on (`METRICS_PORT`): an address only "
        "Prometheus reaches (loopback, the project's private network, or a pod address "
        "guarded by a NetworkPolicy)."))
    metrics_port: int = Field(0, ge=0, le=65535, validation_alias="METRICS_PORT", description=(
        "Port of a second HTTP server that serves only the Prometheus metrics, with no token, "
        "for Prometheus to scrape; 0: none (`/metrics` on `HTTP_PORT` answers operators "
        "either way)."))
    database_url: str = Field(..., validation_alias="DATABASE_URL", description=(
        "SQLAlchemy URL of the service's PostgreSQL database "
        "(postgresql+asyncpg://user:password@host:port/database), as the service's application "
        "role; its migrations read the same variable, as the schema's owner role."))
    instance_name: str = Field("", validation_alias="SAGA_INSTANCE", description=(
        "Which replica of the service this process is, for people: its relay's connection is "
        "named `<service>-relay@<instance>` in `pg_stat_activity`, and so is the holder of the "
        "relay's lease while it leads; `/ready` says it. Unset: `<host name>:<HTTP_PORT>`."))
    db_pool_size: int = Field(20, ge=1, validation_alias="DB_POOL_SIZE", description=(
        "Connections in the service's pool, with no overflow: past this many units of work at "
        "once, the next waits for a connection."))
    # A process that hangs or is cut off inside a transaction keeps its row locks, and the
    # per-saga locks of its commit, until PostgreSQL ends that transaction: other instances'
    # handlers wait for them (or skip them, SKIP LOCKED) meanwhile. No unit of work waits on
    # anything but its own statements between two of them: milliseconds.
    db_idle_in_transaction_timeout_s: float = Field(
        IDLE_IN_TRANSACTION_TIMEOUT_S, gt=0, le=300,
        validation_alias="DB_IDLE_IN_TRANSACTION_TIMEOUT_S", description=(
        "PostgreSQL ends a transaction of the service whose connection has sent nothing for "
        "this long (`idle_in_transaction_session_timeout`): the longest a hung or cut-off "
        "instance keeps the rows it locked from the others."))
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
    http_header_timeout_s: float = Field(10.0, gt=0, le=120,
                                         validation_alias="HTTP_HEADER_TIMEOUT_S", description=(
        "Longest a client may take to send a request's headers, from its connection or from "
        "the request's first byte; past it the connection is closed."))
    http_limit_concurrency: int = Field(1000, ge=1, validation_alias="HTTP_LIMIT_CONCURRENCY",
                                        description=(
        "Most connections (and requests in progress) one instance serves at once; past it "
        "a request is answered `503` at once."))
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
    # service has started (sagakit.runtime.gc_tuning); 0 leaves CPython's collector as it is.
    gc_gen0_threshold: int = Field(10_000, ge=0, validation_alias="GC_GEN0_THRESHOLD", description=(
        "Allocations between two collections of CPython's youngest generation once the service "
        "has started; 0 leaves CPython's default."))

    def instance(self) -> str:
        return self.instance_name or f"{socket.gethostname()}:{self.http_port}"


class HttpLimits(BaseSettings):
    """Read when the app is built, before any route runs: a body larger than this is refused
    (413) as it arrives, by its Content-Length or as it streams, before it is read whole, parsed
    or authenticated (FastAPI reads and parses a body before its security dependencies run)."""

    model_config = SettingsConfigDict(extra="ignore")

    http_max_body_bytes: int = Field(64 * 1024, ge=1024, validation_alias="HTTP_MAX_BODY_BYTES",
                                     description=(
        "Largest request body accepted, in bytes; a larger one gets `413` before it is read. "
        "An order of 100 lines is under 16 KiB."))
    ready_cache_s: float = Field(1.0, gt=0, le=30, validation_alias="READY_CACHE_S",
                                 description=(
        "How long `/ready` answers what its last look at the database found before it looks "
        "again (one look at a time, at most 2 s)."))
