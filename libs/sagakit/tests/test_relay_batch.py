"""The relay's publish step with fakes for PostgreSQL and Kafka: a batch's acknowledgements
are collected in one wait, not one event-loop iteration per row (under load an iteration takes
milliseconds, and a 200-row batch took seconds to be marked)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from sagakit.relay import OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.tables import messaging_tables, service_metadata
from sqlalchemy.ext.asyncio import create_async_engine

ROWS = 200


class FakeConnection:
    def __init__(self) -> None:
        self.marked: list[int] = []

    def is_closed(self) -> bool:
        return False

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        now = dt.datetime.now(dt.UTC)
        return [{"id": i, "topic": "t", "saga_id": f"s{i}", "payload": "{}", "headers": "{}",
                 "created_at": now, "attempts": 0, "traceparent": None, "event_type": "E"}
                for i in range(ROWS)]

    async def execute(self, query: str, status: str, ids: list[int]) -> None:
        self.marked = list(ids)


class FakeProducer:
    """Acknowledges every record at once, as a broker answering one request would."""

    async def send(self, topic: str, **kwargs: Any) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


async def test_a_batch_is_acknowledged_in_one_wait() -> None:
    tables = messaging_tables(service_metadata("relaybatch"))
    engine = create_async_engine("postgresql+asyncpg://unused@127.0.0.1:1/unused")
    relay = OutboxRelay(engine, tables, "relaybatch", MessagingSettings())
    conn = FakeConnection()
    relay._listen_conn = conn  # type: ignore[assignment]
    relay._producer = FakeProducer()
    iterations = 0

    async def ticker() -> None:
        nonlocal iterations
        while True:
            iterations += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    try:
        assert await relay.publish_batch() == ROWS
    finally:
        ticking.cancel()
    assert conn.marked == list(range(ROWS))
    assert iterations < 10, f"{iterations} event-loop iterations for one batch of {ROWS}"
    await engine.dispose()


class OneRowConnection(FakeConnection):
    """One pending row, then none: what the relay finds at low rates."""

    def __init__(self) -> None:
        super().__init__()
        self.selects = 0
        self.marked_once = asyncio.Event()
        self.selected_twice = asyncio.Event()

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        self.selects += 1
        if self.selects == 2:
            self.selected_twice.set()
        rows = await super().fetch(query, *args)
        return rows[:1] if self.selects == 1 else []

    async def execute(self, query: str, status: str, ids: list[int]) -> None:
        await super().execute(query, status, ids)
        self.marked_once.set()


async def test_after_a_partial_batch_the_relay_waits_for_a_notification() -> None:
    """A batch smaller than the limit means the select saw every committed row: the relay
    waits (for the next NOTIFY or its poll) instead of selecting again at once, and a
    notification that arrives wakes it."""
    tables = messaging_tables(service_metadata("relaybatch"))
    engine = create_async_engine("postgresql+asyncpg://unused@127.0.0.1:1/unused")
    settings = MessagingSettings()
    settings.relay_poll_interval_s = 3600  # only a notification can wake it in this test
    relay = OutboxRelay(engine, tables, "relaybatch", settings)
    conn = OneRowConnection()
    relay._listen_conn = conn  # type: ignore[assignment]
    relay._leader = True
    relay._producer = FakeProducer()
    stop = asyncio.Event()
    running = asyncio.create_task(relay.run(stop))
    try:
        await asyncio.wait_for(conn.marked_once.wait(), 5)
        assert conn.marked == [0]
        for _ in range(50):  # event-loop turns, not time: the fakes never wait for I/O
            await asyncio.sleep(0)
        assert conn.selects == 1, "selected again right after a partial batch"
        relay._on_notify()
        await asyncio.wait_for(conn.selected_twice.wait(), 5)
    finally:
        stop.set()
        relay._on_notify()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    await engine.dispose()
