"""The relay's publish step with fakes for PostgreSQL and Kafka: a batch's acknowledgements
are collected in one wait, not one event-loop iteration per row (under load an iteration takes
milliseconds, and a 200-row batch took seconds to be marked); after a partial batch the relay
waits for a notification; acknowledged rows are marked by the next select, or by a statement
of their own when nothing wakes the relay in time."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

from sagakit.relay import MARK_WITHIN_S, OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.tables import messaging_tables, service_metadata
from sqlalchemy.ext.asyncio import create_async_engine

ROWS = 200


class FakeConnection:
    """The pending rows on the first select, none after; records what each statement marked."""

    def __init__(self, rows: int = ROWS) -> None:
        self.rows = rows
        self.selects = 0
        self.marked_by_select: list[int] = []
        self.marked_alone: list[int] = []

    def is_closed(self) -> bool:
        return False

    async def fetch(self, query: str, ids: list[int], acked_at: list[dt.datetime], limit: int
                    ) -> list[dict[str, Any]]:
        self.selects += 1
        self.marked_by_select += ids
        now = dt.datetime.now(dt.UTC)
        return [{"id": i, "topic": "t", "saga_id": f"s{i}", "payload": "{}", "headers": "{}",
                 "created_at": now, "attempts": 0, "traceparent": None, "event_type": "E"}
                for i in range(self.rows)] if self.selects == 1 else []

    async def execute(self, query: str, ids: list[int], acked_at: list[dt.datetime]) -> None:
        self.marked_alone += ids


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
    assert iterations < 10, f"{iterations} event-loop iterations for one batch of {ROWS}"
    assert conn.marked_by_select == []
    assert await relay.publish_batch() == 0
    assert conn.marked_by_select == list(range(ROWS)), "marked by the next batch's select"
    assert conn.marked_alone == []
    await engine.dispose()


async def _running(relay: OutboxRelay) -> tuple[asyncio.Task[None], asyncio.Event]:
    stop = asyncio.Event()
    return asyncio.create_task(relay.run(stop)), stop


async def _stopped(relay: OutboxRelay, running: asyncio.Task[None], stop: asyncio.Event
                   ) -> None:
    stop.set()
    relay._on_notify()
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)


async def _turns(n: int = 50) -> None:
    """Event-loop turns, not time: the fakes never wait for I/O."""
    for _ in range(n):
        await asyncio.sleep(0)


def _relay_on(conn: FakeConnection, poll_s: float) -> tuple[OutboxRelay, Any]:
    tables = messaging_tables(service_metadata("relaybatch"))
    engine = create_async_engine("postgresql+asyncpg://unused@127.0.0.1:1/unused")
    settings = MessagingSettings()
    settings.relay_poll_interval_s = poll_s
    relay = OutboxRelay(engine, tables, "relaybatch", settings)
    relay._listen_conn = conn  # type: ignore[assignment]
    relay._leader = True
    relay._producer = FakeProducer()
    return relay, engine


async def test_after_a_partial_batch_the_relay_waits_for_a_notification() -> None:
    """A batch smaller than the limit means the select saw every committed row: the relay
    waits (for the next NOTIFY or its poll) instead of selecting again at once, and a
    notification that arrives wakes it; the row acknowledged before rides on that select."""
    conn = FakeConnection(rows=1)
    relay, engine = _relay_on(conn, poll_s=3600)  # only a notification can wake it
    running, stop = await _running(relay)
    try:
        await wait_until(lambda: relay.published_total == 1)
        await _turns()
        assert conn.selects == 1, "selected again right after a partial batch"
        relay._on_notify()
        await wait_until(lambda: conn.selects == 2)
        assert conn.marked_by_select == [0] and conn.marked_alone == []
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def test_with_nothing_to_wake_it_the_relay_marks_within_its_bound() -> None:
    """No notification and the poll an hour away: the acknowledged row is marked by a
    statement of its own, about ``MARK_WITHIN_S`` after its acknowledgement, and the relay
    does not select again for it."""
    conn = FakeConnection(rows=1)
    relay, engine = _relay_on(conn, poll_s=3600)
    running, stop = await _running(relay)
    try:
        await wait_until(lambda: relay.published_total == 1)
        acked = time.monotonic()
        await wait_until(lambda: conn.marked_alone == [0], timeout=MARK_WITHIN_S * 10)
        assert time.monotonic() - acked >= MARK_WITHIN_S * 0.9
        assert conn.selects == 1 and conn.marked_by_select == []
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def wait_until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)
