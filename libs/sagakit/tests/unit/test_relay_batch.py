"""The relay's publish step with fakes for PostgreSQL and Kafka: a batch's acknowledgements
are collected in one wait, not one event-loop iteration per row (under load an iteration takes
milliseconds, and a 200-row batch took seconds to be marked); after a partial batch the relay
waits for a commit's signal; acknowledged rows are marked by the next select, or by a statement
of their own when nothing wakes the relay in time. The signal a unit of work reads says whether
a commit must NOTIFY: only while no relay of the process leads."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from sagakit.outbox.relay import MARK_WITHIN_S, OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.store.tables import messaging_tables, service_metadata

from .relay_fakes import ROWS, FakeConnection, FakeProducer, lead, outbox_row


async def test_a_batch_is_acknowledged_in_one_wait() -> None:
    tables = messaging_tables(service_metadata("relaybatch"))
    engine = create_async_engine("postgresql+asyncpg://unused@127.0.0.1:1/unused")
    relay = OutboxRelay(engine, tables, "relaybatch", MessagingSettings())
    conn = FakeConnection()
    relay._listen_conn = conn  # type: ignore[assignment]
    lead(relay)
    relay.publisher.producer = FakeProducer()
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
    assert conn.marked_by_select == [f"m{i}" for i in range(ROWS)], \
        "marked by the next batch's select"
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
    """A relay leading on ``conn``, its producer a ``FakeProducer``."""
    tables = messaging_tables(service_metadata("relaybatch"))
    engine = create_async_engine("postgresql+asyncpg://unused@127.0.0.1:1/unused")
    settings = MessagingSettings()
    settings.relay_poll_interval_s = poll_s
    relay = OutboxRelay(engine, tables, "relaybatch", settings)
    relay._listen_conn = conn  # type: ignore[assignment]
    lead(relay)
    relay.publisher.producer = FakeProducer()
    return relay, engine


async def test_after_a_partial_batch_the_relay_waits_for_a_commit() -> None:
    """A batch smaller than the limit means the select saw every committed row: the relay
    waits (for the next commit's signal or its poll) instead of selecting again at once, and a
    commit wakes it; the row acknowledged before rides on that select."""
    conn = FakeConnection(rows=1)
    relay, engine = _relay_on(conn, poll_s=3600)  # only a commit can wake it
    running, stop = await _running(relay)
    try:
        await wait_until(lambda: relay.published_total == 1)
        await _turns()
        assert conn.selects == 1, "selected again right after a partial batch"
        conn.commit(relay, outbox_row(1))
        await wait_until(lambda: conn.selects == 2)
        assert conn.marked_by_select == ["m0"] and conn.marked_alone == []
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def test_with_nothing_to_wake_it_the_relay_marks_within_its_bound() -> None:
    """No commit and the poll an hour away: the acknowledged row is marked by a
    statement of its own, about ``MARK_WITHIN_S`` after its acknowledgement, and the relay
    does not select again for it."""
    conn = FakeConnection(rows=1)
    relay, engine = _relay_on(conn, poll_s=3600)
    running, stop = await _running(relay)
    try:
        await wait_until(lambda: relay.published_total == 1)
        acked = time.monotonic()
        await wait_until(lambda: conn.marked_alone == ["m0"], timeout=MARK_WITHIN_S * 10)
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


def _sent(relay: OutboxRelay) -> list[tuple[str, int]]:
    return relay.publisher.producer.sent  # type: ignore[no-any-return]


async def test_rows_committed_while_it_runs_are_published_in_commit_order_by_selects() -> None:
    """Commits every 20 ms for three mark intervals, the poll an hour away: each commit's
    signal makes the relay select, every row goes once and in order, and the marks ride on
    those selects (none needs a statement of its own)."""
    conn = FakeConnection(rows=1)
    relay, engine = _relay_on(conn, poll_s=3600)
    running, stop = await _running(relay)
    try:
        await wait_until(lambda: relay.published_total == 1)
        started, i = time.monotonic(), 1
        while time.monotonic() - started < MARK_WITHIN_S * 3:
            conn.commit(relay, outbox_row(i, "one-saga"))
            i += 1
            await asyncio.sleep(0.02)
        await wait_until(lambda: relay.published_total == i)
        assert _sent(relay) == [("s0", 0)] + [("one-saga", n) for n in range(1, i)]
        assert conn.selects > 1 and conn.marked_alone == []
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def test_a_commit_notifies_only_while_no_relay_of_its_process_is_connected() -> None:
    """The unit of work reads ``notify_needed`` when it builds its commit statement: a relay
    that leads here is woken in the process (no NOTIFY, whose lock serialises commits); one
    that lost its connection leaves the NOTIFY to wake the leader elsewhere (a standby's
    part: test_relay_standby.py)."""
    conn = FakeConnection(rows=0)
    relay, engine = _relay_on(conn, poll_s=3600)
    assert relay.signal.notify_needed is False
    woken = relay._wake
    woken.clear()
    relay.signal.committed()
    assert woken.is_set(), "the leading relay is woken in the process"
    await relay._drop_connection()
    assert relay.signal.notify_needed is True, "without a connected relay, commits notify"
    woken.clear()
    relay.signal.committed()
    assert not woken.is_set(), "a standby is not woken by its own process"
    await engine.dispose()
