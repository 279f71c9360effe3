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
