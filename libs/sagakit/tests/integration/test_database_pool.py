"""The services' pool against real PostgreSQL: a connection that sat idle is tested before it
is handed out (one round trip) and replaced when dead; one handed back a moment ago is not
tested at all (that is what makes the test affordable), but one the driver has seen closing is
never handed out."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from saga_harness import config, db
from sagakit.store.database import build_engine


def _url() -> str:
    # Read when a test runs: the stack generates the password at its start, which may be
    # after this module is collected.
    return config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://")


async def _backend_pid(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def test_an_idle_connection_killed_under_the_pool_is_replaced(running_stack: None) -> None:
    engine = build_engine(_url(), "pool-test", 1, ping_if_idle_for_s=0.0)  # every checkout idle
    try:
        dead = await _backend_pid(engine)
        # A live connection passes the test and is kept (no reconnect on every checkout).
        assert await _backend_pid(engine) == dead
        await db.kill_backend(dead)
        assert await _backend_pid(engine) != dead  # tested, found dead, replaced: no error
    finally:
        await engine.dispose()


async def test_a_connection_seen_closing_is_replaced_even_if_used_a_moment_ago(
        running_stack: None) -> None:
    """A database restarted within a second of a connection's last use (stop, start, first
    request) used to hand that connection out untested: a 503 for the first request after
    the restart (as in test_order_api's database-down test). Without the check the caller gets the
    connection failure (the services answer 503 "nothing was done")."""
    engine = build_engine(_url(), "pool-test", 1, ping_if_idle_for_s=3600)  # never tested
    try:
        dead = await _backend_pid(engine)
        await db.kill_backend(dead)  # the server says goodbye and closes the socket
        assert await _backend_pid(engine) != dead  # replaced without an error
    finally:
        await engine.dispose()


async def test_a_failed_statements_error_names_its_sql_not_its_values(running_stack: None) -> None:
    """Errors go to the log: a customer's address or a payment token bound to a statement
    that failed must not go with them."""
    engine = build_engine(_url(), "pool-test", 1)
    secret = "tok_live_4242424242424242"
    try:
        async with engine.connect() as conn:
            with pytest.raises(Exception) as caught:
                await conn.execute(text("SELECT CAST(:token AS text) WHERE 1 / 0 = 1"),
                                   {"token": secret})
        assert "division by zero" in str(caught.value) and "CAST" in str(caught.value)
        assert secret not in str(caught.value)
    finally:
        await engine.dispose()


async def test_more_units_of_work_than_connections_wait_instead_of_opening_new_ones(
        running_stack: None) -> None:
    """A connection opened past the pool's size is closed when handed back: under load that
    is a connection opened and closed over and over (a backend forked each time). The pool
    has no overflow; the busiest moment waits for a connection instead."""
    engine = build_engine(_url(), "pool-test", 2)
    pids: set[int] = set()

    async def unit_of_work() -> None:
        async with engine.connect() as conn:
            pids.add(int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()))
            await conn.execute(text("SELECT pg_sleep(0.05)"))

    try:
        for _ in range(3):
            await asyncio.gather(*(unit_of_work() for _ in range(6)))
        assert len(pids) == 2
    finally:
        await engine.dispose()


async def test_a_request_that_gets_no_connection_in_time_is_a_503_not_a_500(
        running_stack: None) -> None:
    """Every connection of the pool held (a database paused under load holds them all): the
    next request waits the pool's timeout, then the service answers 503 with Retry-After, not
    an Internal Server Error (as POST /orders did when make chaos paused everything once)."""
    from fastapi import FastAPI

    from sagakit.runtime.http_errors import install_database_error_handlers

    engine = build_engine(_url(), "pool-test", 1, pool_timeout_s=0.2)
    app = FastAPI()
    install_database_error_handlers(app)

    @app.post("/orders")
    async def create() -> None:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    try:
        async with engine.connect() as held:  # the pool's only connection, kept busy
            await held.execute(text("SELECT 1"))
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://t") as http:
                r = await http.post("/orders")
        assert r.status_code == 503 and r.headers["Retry-After"] == "1"
        assert "busy" in r.json()["detail"]
    finally:
        await engine.dispose()
