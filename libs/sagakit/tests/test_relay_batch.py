"""The relay's publish step with fakes for PostgreSQL and Kafka: a batch's acknowledgements
are collected in one wait, not one event-loop iteration per row (under load an iteration takes
milliseconds, and a 200-row batch took seconds to be marked); after a partial batch the relay
waits for a notification; acknowledged rows are marked by the next select, or by a statement
of their own when nothing wakes the relay in time. A caught-up relay publishes the rows a
notification brings without selecting them, never twice, never a row behind a failed one, and
goes back to selecting when a notification comes without rows."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Callable
from typing import Any

from sagakit.relay import MARK_WITHIN_S, OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.tables import messaging_tables, service_metadata
from sqlalchemy.ext.asyncio import create_async_engine

ROWS = 200


def _row(i: int, saga: str | None = None) -> dict[str, Any]:
    """An outbox row as the unit of work writes it (and notifies it)."""
    return {"message_id": f"m{i}", "saga_id": saga or f"s{i}", "topic": "t", "event_type": "E",
            "schema_version": "1.0.0", "payload": {"n": i}, "headers": {},
            "traceparent": None}


class FakeConnection:
    """An outbox table: ``rows`` pending at first, more as ``commit`` adds them (notifying the
    relay, as a unit of work's commit does); a select marks the rows it is given and returns the
    pending ones in id order; records what each statement marked. ``during_select`` runs while
    a select is in flight (a commit landing meanwhile, after its snapshot)."""

    def __init__(self, rows: int = ROWS) -> None:
        self.pending: dict[str, dict[str, Any]] = {f"m{i}": _row(i) for i in range(rows)}
        self.selects = 0
        self.selected: list[str] = []
        self.marked_by_select: list[str] = []
        self.marked_alone: list[str] = []
        self.during_select: Callable[[], None] | None = None

    def is_closed(self) -> bool:
        return False

    def commit(self, relay: OutboxRelay, *rows: dict[str, Any], notify: bool = True) -> None:
        for r in rows:
            self.pending[r["message_id"]] = r
        if notify:
            _notify(relay, *rows)

    async def fetch(self, query: str, ids: list[str], acked_at: list[dt.datetime], limit: int
                    ) -> list[dict[str, Any]]:
        self.selects += 1
        self.marked_by_select += ids
        seen = [r for mid, r in self.pending.items() if mid not in ids][:limit]
        self.selected += [r["message_id"] for r in seen]
        for mid in ids:
            self.pending.pop(mid, None)
        if self.during_select is not None:
            self.during_select()
        now = dt.datetime.now(dt.UTC)
        return [{**r, "payload": json.dumps(r["payload"]), "headers": "{}", "created_at": now,
                 "attempts": 0} for r in seen]

    async def execute(self, query: str, ids: list[str], acked_at: list[dt.datetime]) -> None:
        self.marked_alone += ids
        for mid in ids:
            self.pending.pop(mid, None)


class FakeProducer:
    """Acknowledges every record at once, as a broker answering one request would; keeps
    what it was sent, as (saga id, payload's n)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    async def send(self, topic: str, **kwargs: Any) -> asyncio.Future[None]:
        self.sent.append((kwargs["key"].decode(), json.loads(kwargs["value"])["n"]))
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
        assert conn.marked_by_select == ["m0"] and conn.marked_alone == []
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


def _notify(relay: OutboxRelay, *rows: dict[str, Any]) -> None:
    """What asyncpg hands the relay when a unit of work commits ``rows`` (none: an empty
    notification, rows too large for one)."""
    relay._on_notify(None, 1, "chan", json.dumps(list(rows)) if rows else "")


async def _caught_up(rows: int = 1, poll_s: float = 3600
                     ) -> tuple[OutboxRelay, FakeConnection, Any, asyncio.Task[None],
                                asyncio.Event]:
    """A relay whose first select returned ``rows`` rows (fewer than a batch: caught up)."""
    conn = FakeConnection(rows=rows)
    relay, engine = _relay_on(conn, poll_s=poll_s)
    running, stop = await _running(relay)
    await wait_until(lambda: relay.published_total == rows)
    return relay, conn, engine, running, stop


def _sent(relay: OutboxRelay) -> list[tuple[str, int]]:
    return relay._producer.sent  # type: ignore[no-any-return]


async def test_a_caught_up_relay_publishes_notified_rows_without_selecting_them() -> None:
    relay, conn, engine, running, stop = await _caught_up()
    try:
        conn.commit(relay, _row(1, "a"), _row(2, "a"))
        conn.commit(relay, _row(3, "b"))
        await wait_until(lambda: relay.published_total == 4)
        assert conn.selects == 1, "published from the notifications, no select"
        assert _sent(relay) == [("s0", 0), ("a", 1), ("a", 2), ("b", 3)], "in commit order"
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def test_a_notification_without_rows_sends_the_relay_back_to_selecting() -> None:
    relay, conn, engine, running, stop = await _caught_up()
    try:
        conn.commit(relay, _row(4), notify=False)
        _notify(relay)  # row 4 did not fit in its notification
        conn.commit(relay, _row(5))  # committed after it
        await wait_until(lambda: relay.published_total == 3)
        await _turns()
        assert conn.selects == 2, "the empty notification sent the relay back to selecting"
        assert _sent(relay) == [("s0", 0), ("s4", 4), ("s5", 5)], \
            "the row after the one without a notification waited for the select"
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def test_a_row_a_select_published_is_not_published_again_by_its_notification() -> None:
    """A row committed just before a select began is in the select, and its notification,
    received during the select, comes after: it is recognised and skipped. A row committed
    during the select (after its snapshot) is only in its notification: published, after the
    select's rows."""
    conn = FakeConnection(rows=3)
    relay, engine = _relay_on(conn, poll_s=3600)
    # Row 2's notification arrives while the select that returns it runs; row 7 commits then.
    conn.during_select = lambda: (_notify(relay, _row(2)), conn.commit(relay, _row(7, "late")))
    running, stop = await _running(relay)
    try:
        await wait_until(lambda: relay.published_total == 4)
        await _turns()
        assert _sent(relay) == [("s0", 0), ("s1", 1), ("s2", 2), ("late", 7)]
        assert conn.selects == 1
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def test_rows_behind_a_failed_row_never_go_by_notification() -> None:
    relay, conn, engine, running, stop = await _caught_up()
    relay._blocked.add("stuck")
    try:
        conn.commit(relay, _row(1, "stuck"), _row(2, "fine"))
        await wait_until(lambda: relay.published_total == 2)
        await _turns()
        assert _sent(relay) == [("s0", 0), ("fine", 2)], "left pending, for the select"
        assert "m1" in conn.pending
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def _keep_committing(relay: OutboxRelay, conn: FakeConnection, seconds: float) -> int:
    """Commits a row every 20 ms for ``seconds``; returns how many rows there are in all."""
    started = time.monotonic()
    i = 1
    while time.monotonic() - started < seconds:
        conn.commit(relay, _row(i))
        i += 1
        await asyncio.sleep(0.02)
    await wait_until(lambda: relay.published_total >= i)
    return i


async def test_while_notifications_keep_it_busy_the_relay_marks_within_its_bound() -> None:
    """Fed by notifications (and its poll an hour away), the relay never selects, yet what
    Kafka acknowledged is marked within ``MARK_WITHIN_S``, by statements of their own."""
    relay, conn, engine, running, stop = await _caught_up()
    try:
        rows = await _keep_committing(relay, conn, MARK_WITHIN_S * 3)
        assert conn.selects == 1
        assert {f"m{n}" for n in range(rows - int(MARK_WITHIN_S / 0.02) - 10)} \
            <= set(conn.marked_alone), "rows acknowledged a mark interval ago are marked"
        assert len(_sent(relay)) == rows, "each row published once"
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def test_while_notifications_keep_it_busy_the_relay_still_selects_every_poll() -> None:
    """Rows no notification brings (written by hand, or behind a failed row an operator has
    since resolved) are found by a select at least once per poll interval."""
    relay, conn, engine, running, stop = await _caught_up(poll_s=0.3)
    try:
        conn.commit(relay, _row(1000, "by-hand"), notify=False)
        rows = await _keep_committing(relay, conn, 1.5)
        await wait_until(lambda: len(_sent(relay)) == rows + 1)
        assert conn.selects >= 4, f"{conn.selects} selects in 1.5 s with a 0.3-s poll"
        assert ("by-hand", 1000) in _sent(relay)
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def test_the_periodic_select_runs_while_idle_not_ahead_of_a_notified_row() -> None:
    """Events every 70 ms, the poll every 200 ms: each select comes due while the relay waits,
    and runs then, so notified rows do not wait for a select (and its round trip) to go. Waiting
    a whole poll interval from each wake-up left the select due whenever the next notification
    arrived, and that row went by the select."""
    relay, conn, engine, running, stop = await _caught_up(poll_s=0.2)
    try:
        selected_at_start = list(conn.selected)
        started, i = time.monotonic(), 1
        while time.monotonic() - started < 1.5:
            conn.commit(relay, _row(i))
            i += 1
            await asyncio.sleep(0.07)
        await wait_until(lambda: relay.published_total >= i)
        assert conn.selects >= 5, f"{conn.selects} selects in 1.5 s with a 0.2-s poll"
        # A row committed in the instant the select comes due may still go by it.
        by_select = len(conn.selected) - len(selected_at_start)
        assert by_select <= 2, f"{by_select} of {i - 1} notified rows went by a select"
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()


async def test_a_relay_not_caught_up_leaves_notified_rows_to_its_select() -> None:
    """A row committed before the relay's first select has no notification it saw; a later row
    of the same saga notifies first. The relay selects before it trusts a notification: both
    go, in order."""
    conn = FakeConnection(rows=0)
    relay, engine = _relay_on(conn, poll_s=3600)
    conn.commit(relay, _row(1, "x"), notify=False)
    conn.commit(relay, _row(2, "x"))
    running, stop = await _running(relay)
    try:
        await wait_until(lambda: relay.published_total == 2)
        await _turns()
        assert _sent(relay) == [("x", 1), ("x", 2)]
    finally:
        await _stopped(relay, running, stop)
    await engine.dispose()
