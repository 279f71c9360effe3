"""A lane per partition: the records fetched and not yet handled, and the task handling them.

Each partition's records are handled in order by a task of their own, so a slow partition (a
database answering in seconds, a dead letter being written) never holds up the others. A
partition stays in the fetch while its lane is busy: its next records arrive as soon as they
are produced instead of waiting out a fetch already in flight without it (up to the fetch
wait). It is paused only while its lane is full (backpressure) or while a record waits for its
retry, rewound to the first record not done.

Lanes live as long as one Kafka session; a lane's task that fails is raised by the fetch loop
(``raise_if_crashed``), which restarts the consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import TopicPartition
from aiokafka.errors import IllegalStateError

from sagakit.consumer.partitions import Partitions
from sagakit.consumer.records import RawRecord
from sagakit.settings import MessagingSettings


class PartitionControl(Protocol):
    """What a lane does to the Kafka consumer (``AIOKafkaConsumer``)."""

    def pause(self, *partitions: TopicPartition) -> None: ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...


@dataclass
class Lane:
    """One partition's records fetched and not yet handled, and the task handling them."""

    next_offset: int
    records: list[Any] = field(default_factory=list)
    worker: asyncio.Task[None] | None = None
    full: bool = False


class Lanes:
    def __init__(self, partitions: Partitions, settings: MessagingSettings) -> None:
        self.partitions = partitions
        self.settings = settings
        self._lanes: dict[TopicPartition, Lane] = {}
        self._crashed: BaseException | None = None

    def of(self, tp: TopicPartition) -> Lane:
        return self._lanes[tp]

    def raise_if_crashed(self) -> None:
        if self._crashed is not None:
            raise self._crashed

    async def stop(self) -> None:
        """Cancels every lane's task and forgets the lanes."""
        workers = [lane.worker for lane in self._lanes.values() if lane.worker]
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        self._lanes.clear()

    def enqueue(self, kafka: PartitionControl, tp: TopicPartition, records: list[Any]) -> None:
        """Fetched ``records`` (aiokafka's) of partition ``tp`` join its lane."""
        lane = self._lanes.get(tp)
        if lane is None:
            lane = self._lanes[tp] = Lane(next_offset=records[0].offset)
        # Records already in the lane (or done by it) come again when the partition was revoked
        # and assigned back meanwhile: fetched from the committed offset, which lags the lane.
        fresh = [r for r in records if r.offset >= lane.next_offset]
        if not fresh:
            return
        lane.records.extend(fresh)
        lane.next_offset = fresh[-1].offset + 1
        if len(lane.records) >= self.settings.consumer_max_records and not lane.full:
            lane.full = True
            _pause(kafka, tp)
        if lane.worker is None:
            lane.worker = asyncio.create_task(self._drain(kafka, tp, lane))
            lane.worker.add_done_callback(functools.partial(self._lane_done, tp, lane))

    async def _drain(self, kafka: PartitionControl, tp: TopicPartition, lane: Lane) -> None:
        try:
            while lane.records:
                batch, lane.records = lane.records, []
                if lane.full:
                    lane.full = False
                    _resume(kafka, tp)
                retry = await self.partitions.handle(tp, [RawRecord(
                    r.topic, r.partition, r.offset, r.key, r.value, list(r.headers or []),
                    r.timestamp) for r in batch])
                if retry is not None:
                    # The partition is rewound to the record to retry: whatever the lane holds
                    # after it comes again from Kafka once the backoff is over.
                    _rewind(kafka, tp, retry.from_offset)
                    lane.records.clear()
                    lane.next_offset = retry.from_offset
                    lane.full = False
                    _pause(kafka, tp)
                    asyncio.get_running_loop().call_later(retry.delay_s, _resume, kafka, tp)
                    return
        finally:
            # In the same step as the last look at the lane: records enqueued from now on start
            # a new worker. (Left to the done callback, which runs a loop iteration later,
            # records enqueued in between would wait for the partition's next record.)
            lane.worker = None

    def _lane_done(self, tp: TopicPartition, lane: Lane, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._crashed = exc  # raised by the fetch loop: the consumer restarts cleanly


# A partition revoked while its lane was busy has nothing left to pause or rewind here: its
# next owner starts from the committed offset, never past the first record not done. (Raising
# would restart the consumer, and with it a rebalance of the whole group.)
def _pause(kafka: PartitionControl, tp: TopicPartition) -> None:
    with contextlib.suppress(IllegalStateError):
        kafka.pause(tp)


def _rewind(kafka: PartitionControl, tp: TopicPartition, offset: int) -> None:
    with contextlib.suppress(IllegalStateError):
        kafka.seek(tp, offset)


def _resume(kafka: PartitionControl, tp: TopicPartition) -> None:
    with contextlib.suppress(Exception):  # revoked meanwhile: nothing to resume
        kafka.resume(tp)
