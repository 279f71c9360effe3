"""A connection lost while COMMIT is in flight leaves the outcome unknown: the unit of work says
so (never "nothing was done"), the consumer treats it as the database being down (redelivery,
decided by the inbox), and the HTTP layer answers 503 asking for an idempotent retry."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from sagakit.consumer.retry_policy import classify
from sagakit.errors import CommitOutcomeUnknown
from sagakit.store.tables import MessagingTables, messaging_tables, service_metadata
from sagakit.store.unit_of_work import UnitOfWork


class _DyingConnection:
    def __init__(self) -> None:
        self.closed = False

    def in_transaction(self) -> bool:
        return True  # the handler ran a statement: COMMIT is a round trip of its own


    async def execute(self, *args: Any, **kwargs: Any) -> None: ...

    async def commit(self) -> None:
        raise ConnectionResetError(104, "Connection reset by peer")

    async def rollback(self) -> None:
        raise AssertionError("nothing can be rolled back on a dead connection")

    async def close(self) -> None:
        self.closed = True
        raise ConnectionResetError(104, "already gone")


class _Engine:
    def __init__(self, conn: _DyingConnection) -> None:
        self.conn = conn

    async def connect(self) -> _DyingConnection:
        return self.conn


def _tables() -> MessagingTables:
    return messaging_tables(service_metadata("doubt"))


async def test_unit_of_work_reports_an_unknown_outcome() -> None:
    conn = _DyingConnection()
    with pytest.raises(CommitOutcomeUnknown) as caught:
        async with UnitOfWork(_Engine(conn), _tables(), "doubt") as uow:  # type: ignore[arg-type]
            await uow.commit()
    assert isinstance(caught.value.__cause__, ConnectionResetError)
    assert conn.closed


def test_the_consumer_retries_it_as_infrastructure() -> None:
    assert classify(CommitOutcomeUnknown("lost during COMMIT")) == "infrastructure"


async def test_http_answers_503_without_claiming_nothing_was_done() -> None:
    from sagakit.runtime.http_errors import install_database_error_handlers

    app = FastAPI()
    install_database_error_handlers(app)

    @app.post("/orders")
    async def create() -> None:
        raise CommitOutcomeUnknown("connection lost during COMMIT")

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://t") as http:
        r = await http.post("/orders")
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert "may or may not have taken effect" in r.json()["detail"]
    assert "nothing was done" not in r.json()["detail"]


async def test_http_answers_503_when_no_connection_of_the_pool_comes_free() -> None:
    """A pool exhausted past its timeout (the database's route black-holed, every connection
    hanging) is the database unavailable: 503 with Retry-After, never a 500."""
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    from sagakit.runtime.http_errors import install_database_error_handlers

    app = FastAPI()
    install_database_error_handlers(app)

    @app.post("/orders")
    async def create() -> None:
        raise PoolTimeout("QueuePool limit of size 20 overflow 0 reached")

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://t") as http:
        r = await http.post("/orders")
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert "no connection was free" in r.json()["detail"]
