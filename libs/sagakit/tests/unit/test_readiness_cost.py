"""/ready is open to anyone: however often it is called, the database is asked at most once per
READY_CACHE_S, by one request at a time, and a database that does not answer holds no call
longer than the probe's bound."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import httpx
from fastapi import FastAPI

from sagakit.runtime import operations
from sagakit.runtime.operations import operational_router


class _Engine:
    """Counts the connections asked for; each ``SELECT 1`` takes ``delay_s``."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.connections = 0
        self.delay_s = delay_s

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[Any]:
        self.connections += 1
        engine = self

        class _Conn:
            async def execute(self, _: object) -> None:
                await asyncio.sleep(engine.delay_s)

        yield _Conn()


def _app(engine: _Engine, cache_s: float) -> FastAPI:
    app = FastAPI()
    app.state.runtime = SimpleNamespace(
        engine=engine, consumer=None, relay=SimpleNamespace(is_leader=True),
        service_settings=SimpleNamespace(run_consumer=False, run_relay=True,
                                         instance=lambda: "test"))
    app.include_router(operational_router(cache_s))
    return app


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_many_calls_within_the_cache_time_ask_the_database_once() -> None:
    engine = _Engine(delay_s=0.05)
    async with _client(_app(engine, cache_s=60)) as client:
        answers = await asyncio.gather(*(client.get("/ready") for _ in range(100)))
        answers += [await client.get("/ready") for _ in range(100)]
    assert {a.status_code for a in answers} == {200}
    assert {a.json()["checks"]["database"] for a in answers} == {"ok"}
    assert engine.connections == 1


async def test_the_database_is_asked_again_once_the_cache_time_passed() -> None:
    engine = _Engine()
    async with _client(_app(engine, cache_s=0.2)) as client:
        await client.get("/ready")
        deadline = time.monotonic() + 10
        while engine.connections < 2 and time.monotonic() < deadline:
            await client.get("/ready")
            await asyncio.sleep(0.05)
    assert engine.connections == 2


async def test_a_database_that_does_not_answer_holds_a_call_no_longer_than_the_bound(
        monkeypatch: Any) -> None:
    monkeypatch.setattr(operations, "PROBE_TIMEOUT_S", 0.2)
    engine = _Engine(delay_s=3600)
    async with _client(_app(engine, cache_s=60)) as client:
        started = time.monotonic()
        answers = await asyncio.gather(*(client.get("/ready") for _ in range(20)))
        elapsed = time.monotonic() - started
    assert {a.status_code for a in answers} == {503}
    assert answers[0].json()["checks"]["database"] == "unreachable: TimeoutError"
    assert elapsed < 5
    assert engine.connections == 1
