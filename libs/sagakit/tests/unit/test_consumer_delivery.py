"""A partition's records with a fake processor: offsets are committed only up to the first
record not done, even when delivery faults reorder, repeat or hold back records; and the lanes
that feed the partitions from the fetch loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import IllegalStateError

from saga_harness.fault_plugin import FaultSettings, wrap_delivery
from sagakit.consumer import Outcome, RawRecord
from sagakit.consumer.admission import Admission
from sagakit.consumer.delivery import InOrder
from sagakit.consumer.handling import Handling
from sagakit.consumer.lanes import Lanes
from sagakit.consumer.offsets import Offsets
from sagakit.consumer.partitions import Partitions
from sagakit.consumer.records import RetryLater, Verdict
from sagakit.consumer.reporting import Report
from sagakit.consumer.shared_runs import SharedRuns
from sagakit.dead_letters import Attempt
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
    """A record as aiokafka fetches it."""

    offset: int
    topic: str = "t"
    partition: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[Any] = field(default_factory=list)
    timestamp: int = 0


def _raw(*offsets: int) -> list[RawRecord]:
    return [RawRecord("t", 0, o, None, None, []) for o in offsets]


class Recorder:
    """The processor of the partitions, handling nothing: it records the offsets it is handed,
    answers a retry for those in ``retry_at``, and a duplicate for an offset seen before."""

    def __init__(self, retry_at: set[int] | None = None,
                 on_handled: Callable[[RawRecord], None] | None = None) -> None:
        self.admission = Admission("s", {})
        self.retry_at = retry_at or set()
        self.on_handled = on_handled
        self.seen: list[int] = []

    async def admit(self, raw: RawRecord) -> Verdict:
        return await self.admission.admit(raw)

    def skipped(self, outcome: Outcome) -> Outcome:
        return outcome

    async def until_decided(self, raw: RawRecord, verdict: Verdict | None = None,
                            prior_attempts: list[Attempt] | None = None) -> Outcome:
        self.seen.append(raw.offset)
        if self.on_handled is not None:
            self.on_handled(raw)
        if raw.offset in self.retry_at:
            return Outcome("retry", [], "E", 0.0)
        return Outcome("duplicate" if self.seen.count(raw.offset) > 1 else "processed", [], "E")


@dataclass
class Consumer:
    """The partitions and lanes of a consumer, around a ``Recorder``."""

    partitions: Partitions
    lanes: Lanes
    offsets: Offsets
    settings: MessagingSettings
    recorder: Recorder

    @property
    def seen(self) -> list[int]:
        return self.recorder.seen


def _consumer(retry_at: set[int] | None = None, **faults: float) -> Consumer:
    settings = MessagingSettings()
    recorder = Recorder(retry_at)
    offsets = Offsets("s", settings)
    report = Report("s")
    shared_runs = SharedRuns("s", settings, Handling("s", lambda: None, settings), report, None)
    partitions = Partitions(recorder, shared_runs, offsets,
                            wrap_delivery(InOrder(), recorder.until_decided,
                                          FaultSettings(**faults)),
                            settings)
    return Consumer(partitions, Lanes(partitions, settings), offsets, settings, recorder)


async def test_in_order_by_default_and_the_offset_after_the_last() -> None:
    c = _consumer()
    assert await c.partitions.handle(TP, _raw(*range(4))) is None
    assert c.seen == [0, 1, 2, 3]
    assert c.offsets.pending[TP] == 4


async def test_reordered_records_are_all_handled_before_the_offset_moves() -> None:
    c = _consumer(reorder_delivery=1.0)
    await c.partitions.handle(TP, _raw(*range(4)))
    assert c.seen == [1, 0, 3, 2]
    assert c.offsets.pending[TP] == 4


async def test_a_retry_after_a_swap_rewinds_to_the_first_record_not_done() -> None:
    c = _consumer({1}, reorder_delivery=1.0)
    assert await c.partitions.handle(TP, _raw(*range(3))) == RetryLater(0.0, 0)
    # Offset 1 came first and must wait: 0 was never handled, so the rewind goes to 0 and no
    # offset is committed.
    assert c.seen == [1] and TP not in c.offsets.pending


async def test_a_retry_in_order_commits_what_came_before() -> None:
    c = _consumer({2})
    assert await c.partitions.handle(TP, _raw(*range(4))) == RetryLater(0.0, 2)
    assert c.seen == [0, 1, 2] and c.offsets.pending[TP] == 2


async def test_duplicates_now_and_later() -> None:
    c = _consumer(duplicate_delivery=1.0, late_redelivery=1.0)
    await c.partitions.handle(TP, _raw(0, 1))
    assert c.seen == [0, 0, 1, 1]
    await c.partitions.handle(TP, _raw(2))
    # The held-back copies of 0 and 1 come after newer records were handled, before 2.
    assert c.seen == [0, 0, 1, 1, 0, 1, 2, 2]
    assert c.offsets.pending[TP] == 3


# ---------------------------------------------------------------- lanes (the fetch loop's side)


async def _lane_idle(c: Consumer) -> None:
    worker = c.lanes.of(TP).worker
    if worker is not None:
        await worker


async def test_a_busy_partition_is_not_paused_and_its_next_records_queue_behind() -> None:
    c = _consumer()
    kafka = FakeKafka()
    c.lanes.enqueue(kafka, TP, [Rec(0), Rec(1)])
    c.lanes.enqueue(kafka, TP, [Rec(2)])  # fetched while 0 and 1 are being handled
    assert not kafka.paused
    await _lane_idle(c)
    assert c.seen == [0, 1, 2] and c.offsets.pending[TP] == 3


async def test_records_fetched_again_after_a_reassignment_are_not_handled_twice() -> None:
    c = _consumer()
    kafka = FakeKafka()
    c.lanes.enqueue(kafka, TP, [Rec(0), Rec(1)])
    c.lanes.enqueue(kafka, TP, [Rec(0), Rec(1), Rec(2)])  # from the committed offset again
    await _lane_idle(c)
    assert c.seen == [0, 1, 2]


async def test_a_full_lane_pauses_its_partition_until_it_is_taken() -> None:
    c = _consumer()
    c.settings.consumer_max_records = 2
    kafka = FakeKafka()
    c.lanes.enqueue(kafka, TP, [Rec(0), Rec(1)])
    assert kafka.paused  # the fetch loop stops bringing more than the lane can take
    await _lane_idle(c)
    assert not kafka.paused and c.seen == [0, 1]


async def test_a_retry_empties_the_lane_and_pauses_until_the_backoff_is_over() -> None:
    c = _consumer({1})
    kafka = FakeKafka()
    c.lanes.enqueue(kafka, TP, [Rec(0), Rec(1), Rec(2)])
    await _lane_idle(c)
    assert c.seen == [0, 1] and kafka.seeks == [1] and c.offsets.pending[TP] == 1
    lane = c.lanes.of(TP)
    assert lane.records == [] and lane.next_offset == 1
    await asyncio.sleep(0.01)  # the backoff (0 s here) is over: the partition fetches again
    assert not kafka.paused and kafka.pauses == 1


async def test_a_record_enqueued_as_the_worker_finishes_is_not_stranded() -> None:
    """Regression (benchmark, contention scenario): a record that arrived between the worker's
    last look at its lane and its done callback waited 15 s, until the partition's next record
    started a new worker."""
    c = _consumer()
    kafka = FakeKafka()
    handled = asyncio.Event()

    def on_handled(raw: RawRecord) -> None:
        if raw.offset == 0:
            # Runs after the worker's last step and before its done callbacks.
            asyncio.get_running_loop().call_soon(c.lanes.enqueue, kafka, TP, [Rec(1)])
        else:
            handled.set()

    c.recorder.on_handled = on_handled
    c.lanes.enqueue(kafka, TP, [Rec(0)])
    await asyncio.wait_for(handled.wait(), 2)
    assert c.seen == [0, 1]


class RevokedKafka(FakeKafka):
    """The partition was revoked while its lane was busy: aiokafka refuses to touch it."""

    def seek(self, tp: TopicPartition, offset: int) -> None:
        raise IllegalStateError(f"No current assignment for partition {tp}")

    def pause(self, tp: TopicPartition) -> None:
        raise IllegalStateError(f"No current assignment for partition {tp}")


async def test_a_retry_on_a_revoked_partition_does_not_crash_the_consumer() -> None:
    c = _consumer({1})
    c.lanes.enqueue(RevokedKafka(), TP, [Rec(0), Rec(1), Rec(2)])
    await _lane_idle(c)
    c.lanes.raise_if_crashed()  # a crash would restart the consumer: a group rebalance
    assert c.seen == [0, 1] and c.offsets.pending[TP] == 1
    assert c.lanes.of(TP).records == [] and c.lanes.of(TP).next_offset == 1
