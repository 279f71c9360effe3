"""The relay's lead with fakes for PostgreSQL and Kafka (ADR 0012): the leader renews its lease
while its loop makes progress and gives it up when it does not; a renewal refused, or not made
before the lease runs out, loses the lead; a relay whose lease ran out while it held a batch
sends none of it; and the bounds the documentation states are the defaults."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from sagakit.observability import metrics
from sagakit.outbox.leadership import CLOCK_MARGIN, LeadLost
from sagakit.outbox.relay import ASIDE_POLLS, OutboxRelay
from sagakit.runtime.settings import ServiceSettings
from sagakit.settings import MessagingSettings
from sagakit.store.tables import messaging_tables, service_metadata

from .relay_fakes import FakeConnection, FakeProducer, outbox_row


class LeaseConnection(FakeConnection):
    """The outbox and its lease: taken while ``grant`` says so (a new epoch each time), renewed
    as ``renewal`` says (an epoch: renewed; None: another relay holds it), each renewal held
    until ``renewals_answer`` is set; every taking and giving up recorded with its time."""

    def __init__(self, rows: int = 0) -> None:
        super().__init__(rows)
        self.grant = True
        self.epoch = 0
        self.taken_at: list[float] = []
        self.released: list[tuple[int, float]] = []
        self.renewals = 0
        self.renewal: int | None = 1
        self.renewals_answer = asyncio.Event()
        self.renewals_answer.set()

    async def fetchval(self, query: str, *args: Any) -> int | None:
        if query.lstrip().startswith("INSERT"):
            if not self.grant:
                return None
            self.epoch += 1
            self.taken_at.append(time.monotonic())
            return self.epoch
        self.renewals += 1
        await self.renewals_answer.wait()
        return self.renewal

    async def execute(self, query: str, *args: Any) -> None:
        if "holder_pid = NULL" in query:
            self.released.append((args[0], time.monotonic()))
            return
        await super().execute(query, *args)


class SilentProducer(FakeProducer):
    """Kafka that takes every record and acknowledges none."""

    async def send(self, topic: str, **kwargs: Any) -> asyncio.Future[None]:
        await super().send(topic, **kwargs)
        return asyncio.get_running_loop().create_future()

    async def stop(self) -> None:
        return None


def _relay(conn: LeaseConnection, **settings: Any) -> OutboxRelay:
    values: dict[str, Any] = {"relay_lease_s": 1.0, "relay_stall_s": 1.0,
                              "relay_poll_interval_s": 0.05, **settings}
    relay = OutboxRelay(create_async_engine("postgresql+asyncpg://unused@127.0.0.1:1/unused"),
                        messaging_tables(service_metadata("relaylease")), "relaylease",
                        MessagingSettings(**values))
    relay._listen_conn = conn  # type: ignore[assignment]
    return relay


async def _until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        await asyncio.sleep(0.01)


async def _stopped(relay: OutboxRelay, task: asyncio.Task[None], stop: asyncio.Event) -> None:
    """Stops the relay; one still waiting for Kafka's acknowledgements is cancelled, as the
    service's shutdown does after its grace."""
    stop.set()
    relay._wake.set()
    await asyncio.wait([task], timeout=2)
    if not task.done():
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _lost(reason: str) -> float:
    return metrics.RELAY_LEAD_LOST.labels("relaylease", reason)._value.get()


async def test_a_leader_that_finishes_no_round_gives_the_lead_up_and_stands_aside() -> None:
    """Kafka takes the records and acknowledges none: each batch times out and is tried again
    after a backoff, and the lease keeper, seeing no round finished for ``relay_stall_s``,
    gives the lead up at once (a standby need not wait for the lease to run out); the relay
    then stands aside for a few polls before it tries again."""
    conn = LeaseConnection(rows=3)
    relay = _relay(conn, relay_publish_timeout_s=0.2)
    producer = relay.publisher.producer = SilentProducer()
    stalled_before = _lost("stalled")
    stop = asyncio.Event()
    task = asyncio.create_task(relay.run(stop))
    try:
        await _until(lambda: len(producer.sent) == 3, 5, "the batch sent")
        sent_at = time.monotonic()
        await _until(lambda: conn.released, 5, "the lead given up")
        epoch, released_at = conn.released[0]
        assert epoch == 1 and not relay.is_leader
        # Counted from the last round it finished, which ended before this batch was sent.
        assert released_at - conn.taken_at[0] >= 1.0
        assert released_at - sent_at <= 1.0 + relay.lease.renew_every_s + 0.5
        assert _lost("stalled") == stalled_before + 1
        await _until(lambda: len(conn.taken_at) == 2, 5, "the lead taken again")
        assert conn.taken_at[1] - released_at >= ASIDE_POLLS * 0.05 * 0.9, "did not stand aside"
    finally:
        await _stopped(relay, task, stop)


async def test_a_renewal_refused_loses_the_lead_and_nothing_more_is_sent() -> None:
    conn = LeaseConnection(rows=1)
    relay = _relay(conn, relay_stall_s=60)
    producer = relay.publisher.producer = FakeProducer()
    taken_before = _lost("taken")
    stop = asyncio.Event()
    task = asyncio.create_task(relay.run(stop))
    try:
        await _until(lambda: producer.sent == [("s0", 0)], 5, "the first row published")
        conn.grant, conn.renewal = False, None  # another relay took the lead
        await _until(lambda: not relay.is_leader, 2, "the lead lost")
        assert _lost("taken") == taken_before + 1
        conn.commit(relay, outbox_row(1))
        await _until(lambda: conn.selects >= 1 and len(conn.taken_at) == 1, 1, "standing by")
        await asyncio.sleep(3 * 0.05)  # a few of its polls: it may select nothing now
        assert producer.sent == [("s0", 0)]
    finally:
        await _stopped(relay, task, stop)


async def test_a_lease_not_renewed_in_time_is_lost_by_the_holders_own_clock() -> None:
    """PostgreSQL does not answer the renewals (a partition): the relay stops leading when its
    lease runs out by its own clock, a little before the database's expiry."""
    conn = LeaseConnection()
    conn.renewals_answer.clear()
    relay = _relay(conn, relay_stall_s=60)
    relay.publisher.producer = FakeProducer()
    stop = asyncio.Event()
    task = asyncio.create_task(relay.run(stop))
    try:
        await _until(lambda: relay.is_leader, 2, "the lead taken")
        conn.grant = False  # PostgreSQL gives it to the standby once it has run out
        taken = conn.taken_at[0]
        # It acts on the lead until a little before the database's expiry (taken + 1 s), never
        # after it.
        valid_until = relay.lease._valid_until
        assert taken + 1.0 * (1 - CLOCK_MARGIN) - 0.05 <= valid_until <= taken + 1.0
        await _until(lambda: not relay.is_leader, 3, "the lead lost")
        assert time.monotonic() - taken >= 1.0 * (1 - CLOCK_MARGIN) - 0.05
        assert conn.renewals >= 1
    finally:
        conn.renewals_answer.set()
        await _stopped(relay, task, stop)


async def test_a_relay_whose_lease_ran_out_while_it_held_a_batch_sends_none_of_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The worst moment to hang: rows selected, none sent. When the relay goes on, its lease
    has run out (nothing renewed it meanwhile): the rows are left to the next leader."""
    conn = LeaseConnection(rows=3)
    conn.renewals_answer.clear()  # the whole process hangs: no renewal either
    relay = _relay(conn, relay_stall_s=60)
    producer = relay.publisher.producer = FakeProducer()
    assert await relay.lead()
    selected = await relay._select()
    assert len(selected) == 3
    await _until(lambda: not relay.lease.valid(), 2, "the lease run out")
    with pytest.raises(LeadLost):
        await relay.publisher.publish(selected)
    assert producer.sent == []


def test_the_documented_bounds_are_the_defaults() -> None:
    """docs/operations.md states the bounds for these defaults, and the integration tests
    measure them (libs/sagakit/tests/integration/test_relay_liveness.py)."""
    defaults = MessagingSettings()
    assert (defaults.relay_lease_s, defaults.relay_stall_s,
            defaults.relay_poll_interval_s) == (5.0, 6.0, 0.5)
    field = ServiceSettings.model_fields["db_idle_in_transaction_timeout_s"]
    assert field.default == 5.0
