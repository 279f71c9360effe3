"""The lag gauge with a fake consumer: Kafka is asked for a partition's committed offset once
(when the partition is new to this instance); afterwards the instance's own commits count."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiokafka import TopicPartition

from sagakit.consumer.offsets import Offsets
from sagakit.observability import metrics
from sagakit.settings import MessagingSettings

A, B = TopicPartition("lag-t", 0), TopicPartition("lag-t", 1)


@dataclass
class FakeKafka:
    tps: set[TopicPartition]
    ends: dict[TopicPartition, int]
    group: dict[TopicPartition, int]
    asked: list[TopicPartition] = field(default_factory=list)

    def assignment(self) -> set[TopicPartition]:
        return self.tps

    async def committed(self, tp: TopicPartition) -> int | None:
        self.asked.append(tp)
        return self.group.get(tp)

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp] for tp in tps}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.group.update(offsets)


def _lag(tp: TopicPartition) -> float:
    return metrics.CONSUMER_LAG.labels("lagtest", tp.topic, str(tp.partition))._value.get()


async def test_committed_offsets_are_asked_once_then_tracked() -> None:
    offsets = Offsets("lagtest", MessagingSettings())
    kafka = FakeKafka({A, B}, ends={A: 10, B: 5}, group={A: 4})
    await offsets.refresh_lag(kafka)  # type: ignore[arg-type]
    assert sorted(kafka.asked) == [A, B] and _lag(A) == 6 and _lag(B) == 5
    offsets.handled(A, 10)
    await offsets.commit(kafka)  # type: ignore[arg-type]
    await offsets.refresh_lag(kafka)  # type: ignore[arg-type]
    assert len(kafka.asked) == 2 and _lag(A) == 0  # no new request; our own commit counted
    # A rebalance brings a partition this instance did not hold: asked for it, and only it.
    C = TopicPartition("lag-t", 2)
    kafka.tps, kafka.ends[C], kafka.group[C] = {A, B, C}, 7, 7
    await offsets.refresh_lag(kafka)  # type: ignore[arg-type]
    assert kafka.asked[2:] == [C] and _lag(C) == 0
