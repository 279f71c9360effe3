"""A batch whose acknowledgements do not come within ``relay_publish_timeout_s`` is given up
on, but its records stay in the producer, which (idempotent) retries them until the broker
answers and then delivers them. The relay must not send those rows again: it waits for the
sends in flight before it sends anything, marks those acknowledged and sends again only those
that failed, in their saga's order. (Under load, a broker outage put one ``OrdenSolicitada`` on
its topic twice: once from the sends left in flight, once from the batch selected again.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError, NotLeaderForPartitionError

from sagakit.outbox.relay import OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.store.tables import messaging_tables, service_metadata

from .relay_fakes import FakeConnection, lead, outbox_row


class HeldProducer:
    """A broker that does not answer: a send's future stays pending until ``answer`` resolves
    it (acknowledged, or failed with an error), as aiokafka's stays while it retries a record
    the broker has not taken; sends of ``answered_at_once`` rows, and every send once ``back``,
    are acknowledged at once. ``stop`` flushes: the broker answers what it holds."""

    def __init__(self, answered_at_once: frozenset[str] = frozenset()) -> None:
        self.sent: list[tuple[str, int]] = []
        self.held: dict[str, asyncio.Future[None]] = {}
        self.answered_at_once = answered_at_once
        self.back = False
        self.stopped = False

    async def send(self, topic: str, **kwargs: Any) -> asyncio.Future[None]:
        n = json.loads(kwargs["value"])["n"]
        self.sent.append((kwargs["key"].decode(), n))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.back or f"m{n}" in self.answered_at_once:
            fut.set_result(None)
        else:
            self.held[f"m{n}"] = fut
        return fut

    def answer(self, message_id: str, error: BaseException | None = None) -> None:
        fut = self.held.pop(message_id)
        if error is None:
            fut.set_result(None)
        else:
            fut.set_exception(error)

    async def stop(self) -> None:
        self.stopped = True
        for message_id in list(self.held):
            self.answer(message_id)


class FakeEngine:
    """The publisher's own transactions (a row's failed attempt recorded): statements kept."""

    def __init__(self) -> None:
        self.statements: list[Any] = []

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[FakeEngine]:
        yield self

    async def execute(self, statement: Any) -> Any:
        self.statements.append(statement)
        return type("Result", (), {"rowcount": 1})()


def _relay(conn: FakeConnection, producer: HeldProducer) -> tuple[OutboxRelay, FakeEngine]:
    settings = MessagingSettings()
    settings.relay_publish_timeout_s = 0.01  # the batch's own bound, not a synchronisation
    engine = FakeEngine()
    relay = OutboxRelay(engine, messaging_tables(service_metadata("relaybatch")),  # type: ignore[arg-type]
                        "relaybatch", settings)
    relay._listen_conn = conn  # type: ignore[assignment]
    lead(relay)
    relay.publisher.producer = producer
    return relay, engine


async def test_rows_the_producer_delivers_after_a_timeout_are_marked_not_sent_again() -> None:
    conn = FakeConnection(rows=3)
    producer = HeldProducer(answered_at_once=frozenset({"m1"}))
    relay, engine = _relay(conn, producer)
    with pytest.raises(KafkaTimeoutError):
        await relay.publish_batch()
    assert producer.sent == [("s0", 0), ("s1", 1), ("s2", 2)]
    assert len(engine.statements) == 1, "the timed-out row's attempt is recorded"

    producer.answer("m0")
    producer.answer("m2")
    producer.back = True
    published = await relay.publish_batch()
    assert producer.sent == [("s0", 0), ("s1", 1), ("s2", 2)], "a delivered row was sent again"
    assert published == 0
    assert sorted(conn.marked_by_select) == ["m0", "m1", "m2"]
    assert relay.published_total == 3, "m1, acknowledged behind the timed-out m0, counts"
    assert not relay.publisher.in_flight


async def test_nothing_is_sent_while_a_send_is_in_flight_and_a_failed_one_goes_first() -> None:
    """A later row of the saga must not overtake an earlier one still in flight, which may yet
    fail and have to be sent again."""
    conn = FakeConnection(rows=0)
    producer = HeldProducer()
    relay, _ = _relay(conn, producer)
    conn.commit(relay, outbox_row(0, "a"))
    with pytest.raises(KafkaTimeoutError):
        await relay.publish_batch()
    conn.commit(relay, outbox_row(1, "a"))
    selects = conn.selects
    with pytest.raises(KafkaTimeoutError):
        await relay.publish_batch()  # m0 is still unanswered
    assert producer.sent == [("a", 0)], "sent while an earlier send was in flight"
    assert conn.selects == selects

    producer.answer("m0", NotLeaderForPartitionError())
    producer.back = True
    assert await relay.publish_batch() == 2
    assert producer.sent == [("a", 0), ("a", 0), ("a", 1)], "the failed send goes again, first"
    assert conn.marked_by_select == [] and not relay.publisher.in_flight


async def test_after_a_timeout_the_relay_keeps_the_producer_that_holds_the_sends() -> None:
    """A new producer would send the same rows again under another producer id, which the
    broker cannot recognise as copies; once nothing is in flight, a failure replaces it."""
    conn = FakeConnection(rows=1)
    producer = HeldProducer()
    relay, _ = _relay(conn, producer)
    with pytest.raises(KafkaTimeoutError):
        await relay.publish_batch()
    stop = asyncio.Event()
    stop.set()  # no backoff wait
    await relay._on_failure(stop, KafkaTimeoutError(), broker=True)
    assert relay.publisher.producer is producer and not producer.stopped

    producer.answer("m0")
    producer.back = True
    assert await relay.publish_batch() == 0
    await relay._on_failure(stop, KafkaTimeoutError(), broker=True)
    assert relay.publisher.producer is None and producer.stopped


async def test_closing_marks_the_sends_the_producer_flushed_as_it_stopped() -> None:
    conn = FakeConnection(rows=1)
    producer = HeldProducer()
    relay, _ = _relay(conn, producer)
    with pytest.raises(KafkaTimeoutError):
        await relay.publish_batch()
    await relay.close()
    assert producer.stopped
    assert conn.marked_alone == ["m0"], "acknowledged while stopping, yet left to be sent again"
