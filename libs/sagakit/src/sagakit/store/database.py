"""The services' connection pool, and how it finds out that PostgreSQL went away.

SQLAlchemy's ``pool_pre_ping`` tests every connection on every checkout, and with asyncpg that
test is three round trips (BEGIN, an empty statement, ROLLBACK): more than a saga step's own
statements. A connection handed back a moment ago is as alive as the test would show, so only
connections that sat idle in the pool are tested, with one round trip; one whose closing the
driver has already seen (the server went away and said so, or its socket ended) is never handed
out, at no cost: a database restarted within that moment left such connections behind, and
the first request after it got a 503 (tests/integration/test_database_pool.py). A database lost while
connections are busy fails the statements in flight; SQLAlchemy then sees a disconnect and
throws the whole pool away, so the next checkout connects afresh.

The URL may carry libpq's TLS parameters (``?sslmode=verify-full&sslrootcert=...``): they are
translated for asyncpg at each connect (``sagakit.store.postgres_url``).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_only

from sagakit import jsonio
from sagakit.errors import CONNECTION_LOST
from sagakit.store.postgres_url import create_engine_for

# Long enough that a pool under load never tests; short enough that a connection which has
# waited through a database restart is tested before it is used.
PING_IF_IDLE_FOR_S = 1.0

# The default of ``DB_IDLE_IN_TRANSACTION_TIMEOUT_S`` (``ServiceSettings``).
IDLE_IN_TRANSACTION_TIMEOUT_S = 5.0

# A client that vanished without closing its connection (its host lost, the network cut) answers
# no TCP keepalive: PostgreSQL ends its backend within about 25 s, where the kernel's defaults
# take over two hours, and with it whatever the backend held. A client that hangs while its
# kernel still answers (SIGSTOP, a proxy in between) is not caught this way: its open
# transaction is, by ``idle_in_transaction_session_timeout``, and the relay's lead by its lease
# (sagakit.outbox.leadership). Ignored on a Unix socket.
PEER_KEEPALIVE = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5",
                  "tcp_keepalives_count": "3", "tcp_user_timeout": "20000"}


def session_settings(idle_in_transaction_timeout_s: float = IDLE_IN_TRANSACTION_TIMEOUT_S
                     ) -> dict[str, str]:
    """PostgreSQL settings every connection of a service's pool starts with: a transaction
    whose client sends nothing for ``idle_in_transaction_timeout_s`` is ended by the server,
    its row locks and per-saga locks released, so a hung or cut-off instance does not stall the
    sagas it touched past that; and the keepalives above."""
    return {**PEER_KEEPALIVE, "idle_in_transaction_session_timeout":
            f"{round(idle_in_transaction_timeout_s * 1000)}ms"}


# SQLAlchemy's default: a database paused for longer than this leaves requests a 503.
POOL_TIMEOUT_S = 30.0


def build_engine(url: str, name: str, pool_size: int,
                 ping_if_idle_for_s: float = PING_IF_IDLE_FOR_S,
                 server_settings: dict[str, str] | None = None,
                 idle_in_transaction_timeout_s: float = IDLE_IN_TRANSACTION_TIMEOUT_S,
                 pool_timeout_s: float = POOL_TIMEOUT_S) -> AsyncEngine:
    engine = create_engine_for(
        url,
        server_settings={**session_settings(idle_in_transaction_timeout_s),
                         **(server_settings or {}), "application_name": name},
        # No overflow: SQLAlchemy closes an overflow connection as soon as it is handed back,
        # and under load that was a new connection every half second per service (a backend
        # forked, a TLS attempt, type introspection each time). Past ``pool_size``
        # concurrent units of work, the next one waits for a connection instead.
        pool_size=pool_size,
        max_overflow=0,
        # How long a unit of work waits for a connection before it gives up
        # (``sqlalchemy.exc.TimeoutError``, answered 503 by ``sagakit.runtime.http_errors``).
        pool_timeout=pool_timeout_s,
        pool_recycle=1800,
        # The most recently used connection first: under load the same few stay warm (and are
        # never tested), the rest age out of use instead of all going idle in turn.
        pool_use_lifo=True,
        # A failed statement's error names its SQL, never its values: they are customers'
        # addresses, payment tokens and whole event payloads, and the error goes to the log.
        hide_parameters=True,
        # JSON columns, read and written on every message (sagakit.jsonio).
        json_serializer=jsonio.dumps,
        json_deserializer=jsonio.loads,
        connect_args={"command_timeout": 30, "timeout": 10},
    )
    ping_idle_connections(engine, ping_if_idle_for_s)
    return engine


def ping_idle_connections(engine: AsyncEngine, idle_for_s: float) -> None:
    """On checkout: a connection seen closed is discarded; one idle for ``idle_for_s`` is
    tested first (module docstring)."""
    pool_events: Any = engine.sync_engine.pool

    @event.listens_for(pool_events, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info["checked_in_at"] = time.monotonic()

    @event.listens_for(pool_events, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if dbapi_connection.driver_connection.is_closed():
            # The pool discards this connection and checks out a fresh one.
            raise DisconnectionError("pooled connection was closed")
        since = record.info.get("checked_in_at")
        if since is None or time.monotonic() - since < idle_for_s:
            return
        try:
            # Runs inside SQLAlchemy's greenlet: await_only hands the coroutine to the loop.
            await_only(dbapi_connection.driver_connection.fetchval("SELECT 1"))
        except CONNECTION_LOST as exc:
            # The pool discards this connection and checks out a fresh one.
            raise DisconnectionError("idle pooled connection is dead") from exc
