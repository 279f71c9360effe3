"""The offsets of the records handled, on their way to Kafka, and the lag gauge that reads them.

Offsets are recorded after each record's local commit (``Partitions``) and sent by one request
per consumer at most every ``consumer_offset_commit_interval_ms`` (``committer``), and before a
rebalance takes partitions away (``commit``, from the rebalance listener): what a crash loses is
redelivered and absorbed by the inbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from sagakit.observability import metrics
from sagakit.settings import MessagingSettings

log = logging.getLogger("sagakit.consumer")


class Offsets:
    def __init__(self, service: str, settings: MessagingSettings) -> None:
        self.service = service
        self.settings = settings
        self.pending: dict[TopicPartition, int] = {}
        """Recorded, not yet sent to Kafka: the next offset to read, by partition."""
        self._ready = asyncio.Event()
        # The group's committed offsets as far as this instance knows them (for the lag gauge).
        self._committed: dict[TopicPartition, int] = {}
        self._lag_assignment: set[TopicPartition] = set()

    def handled(self, tp: TopicPartition, next_offset: int) -> None:
        self.pending[tp] = next_offset
        self._ready.set()

    async def commit(self, kafka: AIOKafkaConsumer) -> None:
        """Sends the pending offsets of the partitions ``kafka`` holds."""
        if not self.pending:
            return
        offsets, self.pending = self.pending, {}
        assigned = kafka.assignment()
        mine = {tp: o for tp, o in offsets.items() if tp in assigned}
        try:
            await kafka.commit(mine)
            self._committed.update(mine)
        except KafkaError:
            # Keep them for the next try, unless newer offsets were recorded meanwhile.
            for tp, o in offsets.items():
                self.pending.setdefault(tp, o)
            raise

    async def before_rebalance(self, kafka: AIOKafkaConsumer) -> None:
        """Offsets go to Kafka only every ``consumer_offset_commit_interval_ms``: the instance
        that gets a partition would otherwise handle again what this one handled since (the
        inbox would absorb it, at the cost of a transaction a record)."""
        try:
            await self.commit(kafka)
        except KafkaError as exc:
            log.warning("offsets not sent before a rebalance: %r", exc,
                        extra={"service": self.service})

    async def committer(self, kafka: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._ready.wait()
            self._ready.clear()
            # Records handled meanwhile share the commit.
            await asyncio.sleep(self.settings.consumer_offset_commit_interval_ms / 1000)
            try:
                await self.commit(kafka)
            except KafkaError as exc:
                log.warning("offset commit failed, will retry: %r", exc,
                            extra={"service": self.service})
                self._ready.set()

    async def refresh_lag(self, kafka: AIOKafkaConsumer) -> None:
        """Lag per partition: log end minus the committed offset. The committed offsets are this
        instance's own commits, asked of Kafka only for partitions new to it (one request per
        partition), so the gauge costs one request every few seconds, not one per partition."""
        assignment = set(kafka.assignment())
        if not assignment:
            return
        if assignment != self._lag_assignment:
            # A rebalance: another instance may have committed these partitions meanwhile.
            self._committed = {tp: o for tp, o in self._committed.items()
                               if tp in assignment and tp in self._lag_assignment}
            self._lag_assignment = assignment
        with contextlib.suppress(Exception):
            for tp in assignment - self._committed.keys():
                self._committed[tp] = await kafka.committed(tp) or 0
            ends = await kafka.end_offsets(list(assignment))
            for tp in assignment:
                metrics.CONSUMER_LAG.labels(self.service, tp.topic, str(tp.partition)).set(
                    max(0, ends.get(tp, 0) - self._committed.get(tp, 0)))
