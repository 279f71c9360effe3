"""A standby relay (another replica leads) and the commits of its process (ADR 0010): they
commit without a NOTIFY, whose database-wide lock would serialise them with every other
notifying commit; the standby wakes the leader with a NOTIFY of its own, one at a time, so a
burst of commits costs a few notifications, not one each. Without a connection it can pass
nothing on, and the commits notify by themselves again."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from sagakit.observability import metrics
from sagakit.outbox.relay import OutboxRelay
from sagakit.outbox.statements import NOTIFY_LEADER
from sagakit.settings import MessagingSettings
from sagakit.store.tables import messaging_tables, service_metadata


class StandbyConnection:
    """The relay's connection while another replica holds the lead: the lock is never
    granted; every statement sent is kept, and a NOTIFY waits for ``answer`` when it is
    given (a round trip in progress)."""

    def __init__(self, answer: asyncio.Event | None = None) -> None:
        self.notified: list[tuple[str, tuple[Any, ...]]] = []
        self.tries = 0
        self.answer = answer
        self.in_flight = 0

    def is_closed(self) -> bool:
        return False

    async def fetchval(self, query: str, *args: Any) -> int | None:
        self.tries += 1
        return None

    async def execute(self, query: str, *args: Any) -> None:
        self.in_flight += 1
        try:
            if self.answer is not None:
                await self.answer.wait()
            self.notified.append((query, args))
        finally:
            self.in_flight -= 1

    async def close(self, timeout: float = 0) -> None:
        return None


def _standby(conn: StandbyConnection) -> tuple[OutboxRelay, Any]:
    tables = messaging_tables(service_metadata("standby"))
    engine = create_async_engine("postgresql+asyncpg://unused@127.0.0.1:1/unused")
    settings = MessagingSettings()
    settings.relay_poll_interval_s = 3600  # it tries for the lead once, then stands by
    relay = OutboxRelay(engine, tables, "standby", settings)
    relay._listen_conn = conn  # type: ignore[assignment]
    return relay, engine


async def wait_until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


async def _stop(relay: OutboxRelay, task: asyncio.Task[None], stop: asyncio.Event) -> None:
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_a_standby_wakes_the_leader_for_its_processes_commits_which_do_not_notify() -> None:
    conn = StandbyConnection()
    relay, engine = _standby(conn)
    stop = asyncio.Event()
    task = asyncio.create_task(relay.run(stop))
    try:
        await wait_until(lambda: conn.tries == 1)
        assert not relay.is_leader
        assert relay.signal.notify_needed is False, \
            "a commit in a standby's process would NOTIFY with the commit"
        forwarded = metrics.RELAY_WAKEUPS_FORWARDED.labels("standby")._value.get()
        relay.signal.committed()
        await wait_until(lambda: len(conn.notified) == 1)
        assert conn.notified == [(NOTIFY_LEADER, (relay.tables.notify_channel,))]
        assert metrics.RELAY_WAKEUPS_FORWARDED.labels("standby")._value.get() == forwarded + 1
        assert metrics.RELAY_LEADER.labels("standby")._value.get() == 0
    finally:
        await _stop(relay, task, stop)
    await engine.dispose()


async def test_commits_while_a_notify_is_on_its_way_share_the_next_one() -> None:
    answer = asyncio.Event()
    conn = StandbyConnection(answer)
    relay, engine = _standby(conn)
    stop = asyncio.Event()
    task = asyncio.create_task(relay.run(stop))
    try:
        await wait_until(lambda: conn.tries == 1)
        relay.signal.committed()
        await wait_until(lambda: conn.in_flight == 1)
        for _ in range(50):
            relay.signal.committed()
        answer.set()
        await wait_until(lambda: len(conn.notified) == 2)
        for _ in range(20):  # turns of the loop in which a third would be sent
            await asyncio.sleep(0)
        assert len(conn.notified) == 2, "one NOTIFY per commit, not per round trip"
        relay.signal.committed()
        await wait_until(lambda: len(conn.notified) == 3)
    finally:
        await _stop(relay, task, stop)
    await engine.dispose()


async def test_without_its_connection_a_standby_leaves_the_notify_to_the_commits() -> None:
    conn = StandbyConnection()
    relay, engine = _standby(conn)
    relay._lead(False)
    assert relay.signal.notify_needed is False
    await relay._drop_connection()
    assert relay.signal.notify_needed is True, "nothing would wake the leader"
    relay.signal.committed()
    assert not relay._wake.is_set()
    await engine.dispose()


async def test_a_standby_that_takes_the_lead_is_woken_by_its_processes_commits() -> None:
    conn = StandbyConnection()
    relay, engine = _standby(conn)
    relay._lead(False)
    relay._lead(True)
    assert relay.signal.relay_leads and relay.signal.notify_needed is False
    assert metrics.RELAY_LEADER.labels("standby")._value.get() == 1
    relay._wake.clear()
    relay.signal.committed()
    assert relay._wake.is_set()
    assert conn.notified == []
    await engine.dispose()

