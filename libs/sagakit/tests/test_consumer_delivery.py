"""The consumer's partition loop with a fake consumer: offsets are committed only up to the
first record not done, even when delivery faults reorder, repeat or hold back records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from sagakit.consumer import EventConsumer, Outcome, RawRecord
from sagakit.settings import MessagingSettings

TP = TopicPartition("t", 0)


@dataclass
class FakeKafka:
    seeks: list[int] = field(default_factory=list)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append(offset)

    def pause(self, tp: TopicPartition) -> None: ...

    def resume(self, tp: TopicPartition) -> None: ...


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

    async def process(raw: RawRecord, prior: object = None) -> Outcome:
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
    assert await consumer._partition(kafka, TP, [Rec(o) for o in range(3)]) == 0.0
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
