"""The consumer's partition loop with a fake consumer: offsets are committed only up to the
first record not done, even when delivery faults reorder, repeat or hold back records."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import IllegalStateError
from sagakit.consumer import EventConsumer, Outcome, RawRecord, RetryLater
from sagakit.settings import MessagingSettings

TP = TopicPartition("t", 0)


@dataclass
class FakeKafka:
    seeks: list[int] = field(default_factory=list)
    paused: bool = False
    pauses: int = 0

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append(offset)

    def pause(self, tp: TopicPartition) -> None:
        self.paused = True
        self.pauses += 1

    def resume(self, tp: TopicPartition) -> None:
        self.paused = False


@dataclass
class Rec:
    offset: int
    topic: str = "t"
    partition: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[Any] = field(default_factory=list)
    timestamp: int = 0


def _consumer(retry_at: set[int] | None = None, **faults: float
              ) -> tuple[EventConsumer, list[int]]:
    settings = MessagingSettings(**{f"SAGA_FAULT_{k.upper()}": v for k, v in faults.items()})
    consumer = EventConsumer(service="s", topics=["t"], handlers={}, uow_factory=lambda: None,
                             settings=settings)
    seen: list[int] = []

    async def process(raw: RawRecord, prior: object = None, verdict: object = None) -> Outcome:
        seen.append(raw.offset)
        if retry_at and raw.offset in retry_at:
            return Outcome("retry", [], "E", 0.0)
        return Outcome("duplicate" if seen.count(raw.offset) > 1 else "processed", [], "E")

    consumer.process = process  # type: ignore[method-assign]
    return consumer, seen


async def test_in_order_by_default_and_the_offset_after_the_last() -> None:
    consumer, seen = _consumer()
    assert await consumer._partition(FakeKafka(), TP, [Rec(o) for o in range(4)]) is None
    assert seen == [0, 1, 2, 3]
    assert consumer._offsets[TP] == 4


async def test_reordered_records_are_all_handled_before_the_offset_moves() -> None:
    consumer, seen = _consumer(reorder_delivery=1.0)
    await consumer._partition(FakeKafka(), TP, [Rec(o) for o in range(4)])
    assert seen == [1, 0, 3, 2]
    assert consumer._offsets[TP] == 4


async def test_a_retry_after_a_swap_rewinds_to_the_first_record_not_done() -> None:
    consumer, seen = _consumer({1}, reorder_delivery=1.0)
    kafka = FakeKafka()
    assert await consumer._partition(kafka, TP, [Rec(o) for o in range(3)]) == RetryLater(0.0, 0)
    # Offset 1 came first and must wait: 0 was never handled, so the rewind goes to 0 and no
    # offset is committed.
    assert seen == [1] and kafka.seeks == [0] and TP not in consumer._offsets


async def test_a_retry_in_order_commits_what_came_before() -> None:
    consumer, seen = _consumer({2})
    kafka = FakeKafka()
    await consumer._partition(kafka, TP, [Rec(o) for o in range(4)])
    assert seen == [0, 1, 2] and kafka.seeks == [2] and consumer._offsets[TP] == 2


async def test_duplicates_now_and_later() -> None:
    consumer, seen = _consumer(duplicate_delivery=1.0, late_redelivery=1.0)
    await consumer._partition(FakeKafka(), TP, [Rec(0), Rec(1)])
    assert seen == [0, 0, 1, 1]
    await consumer._partition(FakeKafka(), TP, [Rec(2)])
    # The held-back copies of 0 and 1 come after newer records were handled, before 2.
    assert seen == [0, 0, 1, 1, 0, 1, 2, 2]
    assert consumer._offsets[TP] == 3


# ---------------------------------------------------------------- lanes (the fetch loop's side)


async def _lane_idle(consumer: EventConsumer) -> None:
    worker = consumer._lanes[TP].worker
    if worker is not None:
        await worker


async def test_a_busy_partition_is_not_paused_and_its_next_records_queue_behind() -> None:
    consumer, seen = _consumer()
    kafka = FakeKafka()
    consumer._enqueue(kafka, TP, [Rec(0), Rec(1)])
    consumer._enqueue(kafka, TP, [Rec(2)])  # fetched while 0 and 1 are being handled
    assert not kafka.paused
    await _lane_idle(consumer)
    assert seen == [0, 1, 2] and consumer._offsets[TP] == 3


async def test_records_fetched_again_after_a_reassignment_are_not_handled_twice() -> None:
    consumer, seen = _consumer()
    kafka = FakeKafka()
    consumer._enqueue(kafka, TP, [Rec(0), Rec(1)])
    consumer._enqueue(kafka, TP, [Rec(0), Rec(1), Rec(2)])  # from the committed offset again
    await _lane_idle(consumer)
    assert seen == [0, 1, 2]


async def test_a_full_lane_pauses_its_partition_until_it_is_taken() -> None:
    consumer, seen = _consumer()
    consumer.settings.consumer_max_records = 2
    kafka = FakeKafka()
    consumer._enqueue(kafka, TP, [Rec(0), Rec(1)])
    assert kafka.paused  # the fetch loop stops bringing more than the lane can take
    await _lane_idle(consumer)
    assert not kafka.paused and seen == [0, 1]


async def test_a_retry_empties_the_lane_and_pauses_until_the_backoff_is_over() -> None:
    consumer, seen = _consumer({1})
    kafka = FakeKafka()
    consumer._enqueue(kafka, TP, [Rec(0), Rec(1), Rec(2)])
    await _lane_idle(consumer)
    assert seen == [0, 1] and kafka.seeks == [1] and consumer._offsets[TP] == 1
    lane = consumer._lanes[TP]
    assert lane.records == [] and lane.next_offset == 1
    await asyncio.sleep(0.01)  # the backoff (0 s here) is over: the partition fetches again
    assert not kafka.paused and kafka.pauses == 1


async def test_a_record_enqueued_as_the_worker_finishes_is_not_stranded() -> None:
    """Regression (benchmark, contention scenario): a record that arrived between the worker's
    last look at its lane and its done callback waited 15 s, until the partition's next record
    started a new worker."""
    consumer, seen = _consumer()
    kafka = FakeKafka()
    handled = asyncio.Event()
    plain = consumer.process

    async def process(raw: RawRecord, prior: object = None, verdict: object = None) -> Outcome:
        outcome = await plain(raw, prior)
        if raw.offset == 0:
            # Runs after the worker's last step and before its done callbacks.
            asyncio.get_running_loop().call_soon(consumer._enqueue, kafka, TP, [Rec(1)])
        else:
            handled.set()
        return outcome

    consumer.process = process  # type: ignore[method-assign]
    consumer._enqueue(kafka, TP, [Rec(0)])
    await asyncio.wait_for(handled.wait(), 2)
    assert seen == [0, 1]


class RevokedKafka(FakeKafka):
    """The partition was revoked while its lane was busy: aiokafka refuses to touch it."""

    def seek(self, tp: TopicPartition, offset: int) -> None:
        raise IllegalStateError(f"No current assignment for partition {tp}")

    def pause(self, tp: TopicPartition) -> None:
        raise IllegalStateError(f"No current assignment for partition {tp}")


async def test_a_retry_on_a_revoked_partition_does_not_crash_the_consumer() -> None:
    consumer, seen = _consumer({1})
    consumer._enqueue(RevokedKafka(), TP, [Rec(0), Rec(1), Rec(2)])
    await _lane_idle(consumer)
    assert consumer._crashed is None  # a crash would restart the consumer: a group rebalance
    assert seen == [0, 1] and consumer._offsets[TP] == 1
    assert consumer._lanes[TP].records == [] and consumer._lanes[TP].next_offset == 1
