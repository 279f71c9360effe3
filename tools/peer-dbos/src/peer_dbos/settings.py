"""What a peer process is told by its environment (``PEER_DBOS_*``); the bearer-token check
reads pedidos' own ``AUTH_*`` settings (sagakit.auth)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# One name for the workflow, whichever process starts or enqueues it.
WORKFLOW = "check_then_pay"
QUEUE = "orders"
# The peer's tables and DBOS's in the stack's PostgreSQL, beside the services' schemas.
APP_SCHEMA = "peer_dbos"
SYSTEM_SCHEMA = "peer_dbos_system"


def system_schema(shape: str) -> str:
    """Where DBOS keeps its system tables for a shape. The queue shape has its own: every DBOS
    process polls every queue registered in its system database, and a queue polled every few
    milliseconds would cost the other shapes a fifth of a core doing nothing."""
    return f"{APP_SCHEMA}_queue_system" if shape == "queue" else SYSTEM_SCHEMA


class PeerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PEER_DBOS_", extra="ignore")

    database_url: str = Field(..., description=(
        "`postgresql://` URL of the stack's database; the peer keeps its rows in the schema "
        f"`{APP_SCHEMA}` and DBOS its system tables in `PEER_DBOS_SYSTEM_SCHEMA`."))
    system_schema: str = Field(SYSTEM_SCHEMA, description=(
        "DBOS's system schema; `python -m peer_dbos` sets it by shape (the queue shape: "
        f"`{APP_SCHEMA}_queue_system`)."))
    gateway_url: str = Field("http://127.0.0.1:8010", description="The fake payment gateway.")
    gateway_secret_key: str = Field(..., min_length=1, description=(
        "The gateway's secret key (`make credentials`: gateway.secret_key)."))
    gateway_timeout_s: float = Field(10.0, gt=0, description=(
        "Longest a charge or refund call may take before it is retried under the same key."))
    port: int = Field(8040, description="Where POST /orders listens (127.0.0.1).")
    # DBOS's defaults, raised: every request thread and every workflow holds a connection
    # while it runs, and a closed loop of 64 clients would queue on a pool of 20 (the system
    # database's default) or on the datasource's SQLAlchemy default of 5 + 10.
    system_pool_size: int = Field(48, ge=1, description=(
        "Connections each process keeps to DBOS's system tables (DBOS's default: 20)."))
    datasource_pool_size: int = Field(48, ge=1, description=(
        "Connections each process keeps for the saga's transactions (SQLAlchemy's default: "
        "5 + 10 overflow)."))
    # DBOS's default is unbounded threads; bounded here so that a burst cannot start hundreds
    # of threads fighting for two cores. Enough for the deepest closed loop the bench runs.
    executor_threads: int = Field(128, ge=1, description=(
        "DBOS's workflow threads and the HTTP handler's threads per process (DBOS's default: "
        "unbounded; Starlette's: 40)."))
    # A queue worker looks for new work this often. DBOS's default, 1 s, would add half a
    # second to a saga's median; every 10 ms cost an idle worker a fifth of a core (each poll
    # a query), every 50 ms about 5 %, for 25 ms on the median.
    queue_polling_interval_s: float = Field(0.05, gt=0, description=(
        "How often the queue shape's worker looks for enqueued workflows (DBOS's default: 1 s)."))
    style: Literal["sync", "async"] = Field("sync", description=(
        "DBOS's synchronous API (workflows on its executor threads) or its async one "
        "(coroutines on the event loop); the queue shape runs the synchronous one."))
    # How many processes serve POST /orders in the per-core shape (0: one per core).
    processes: int = Field(0, ge=0, description=(
        "Processes of the per-core shape; 0: one per core."))
