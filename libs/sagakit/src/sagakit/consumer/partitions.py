"""A partition's fetched records handled in order; the offset recorded only up to the first
record not done.

Each record is admitted (``Processor.admit``), then handled alone until decided
(``Processor.until_decided``), or, with its neighbours, in a shared transaction
(``SharedRuns``). A record that waits for a retry ends the batch: the partition is rewound to
the first record not done and fetched again once the backoff is over, with the record's
attempts so far kept here for it. Offsets are recorded only after the local transaction
committed (or the record was dead-lettered), and go to Kafka later (``Offsets``): a crash
redelivers what was handled since, which the inbox absorbs.
"""

from __future__ import annotations

from typing import Protocol

from aiokafka import TopicPartition

from sagakit.consumer.delivery import Delivery
from sagakit.consumer.offsets import Offsets
from sagakit.consumer.records import Admitted, Outcome, RawRecord, RetryLater, Verdict
from sagakit.consumer.shared_runs import SharedRuns
from sagakit.dead_letters import Attempt
from sagakit.settings import MessagingSettings


class Processing(Protocol):
    """What the partitions ask of ``sagakit.consumer.processing.Processor``."""

    async def admit(self, raw: RawRecord) -> Verdict: ...

    def skipped(self, outcome: Outcome) -> Outcome: ...

    async def until_decided(self, raw: RawRecord, verdict: Verdict | None = None,
                            prior_attempts: list[Attempt] | None = None) -> Outcome: ...


class Partitions:
    def __init__(self, processing: Processing, shared_runs: SharedRuns, offsets: Offsets,
                 delivery: Delivery, settings: MessagingSettings) -> None:
        self.processing = processing
        self.shared_runs = shared_runs
        self.offsets = offsets
        self.delivery = delivery
        self.settings = settings
        # Attempts so far of the records waiting for their retry, by partition and offset.
        self._retrying: dict[tuple[TopicPartition, int], list[Attempt]] = {}

    async def handle(self, tp: TopicPartition, records: list[RawRecord]) -> RetryLater | None:
        """Handles the records in order. Consecutive records whose handlers may share a
        transaction are handled in one (``_handle_run``). When it stops at a record waiting
        for a retry, it says from which offset to fetch the partition again, and when."""
        batch = await self.delivery.hand_over(tp, records)
        completed: set[int] = set()
        run: list[tuple[RawRecord, Admitted]] = []
        try:
            for raw in batch:
                verdict = await self.processing.admit(raw)
                if isinstance(verdict, Outcome):
                    # Nothing to write and nothing to wait for: it does not end a run.
                    await self._settle(tp, raw, self.processing.skipped(verdict), completed)
                    continue
                shares = self._may_share(tp, raw, verdict)
                if shares:
                    assert isinstance(verdict, Admitted)
                    run.append((raw, verdict))
                if run and (not shares or len(run) >= self.settings.consumer_batch_max):
                    waiting = await self._handle_run(tp, run, completed)
                    run = []
                    if waiting is not None:
                        return self._retry_later(tp, batch, completed, *waiting)
                if shares:
                    continue
                self.shared_runs.ask_for(verdict)
                outcome = await self._alone(tp, raw, verdict)
                if outcome.status == "retry":
                    return self._retry_later(tp, batch, completed, raw, outcome)
                await self._settle(tp, raw, outcome, completed)
            if run:
                waiting = await self._handle_run(tp, run, completed)
                if waiting is not None:
                    return self._retry_later(tp, batch, completed, *waiting)
            return None
        finally:
            # Only after the local transaction committed (or the record was dead-lettered),
            # and only up to the first record not done. Kafka hears of it within
            # ``consumer_offset_commit_interval_ms``: a crash before then redelivers the records
            # handled since, which the inbox absorbs.
            next_offset = None
            for raw in sorted(batch, key=lambda r: r.offset):
                if raw.offset not in completed:
                    break
                next_offset = raw.offset + 1
            if next_offset is not None:
                self.offsets.handled(tp, next_offset)

    async def _alone(self, tp: TopicPartition, raw: RawRecord, verdict: Verdict) -> Outcome:
        return await self.processing.until_decided(raw, verdict,
                                                   self._retrying.pop((tp, raw.offset), None))

    def _retry_later(self, tp: TopicPartition, batch: list[RawRecord], completed: set[int],
                     raw: RawRecord, outcome: Outcome) -> RetryLater:
        # Wait without holding the loop: the partition is rewound to its first record not
        # done and kept paused, and the other partitions go on meanwhile.
        self._retrying[(tp, raw.offset)] = outcome.attempts
        rewind = min(r.offset for r in batch if r.offset not in completed)
        return RetryLater(outcome.retry_in_s or 0.0, rewind)

    async def _settle(self, tp: TopicPartition, raw: RawRecord, outcome: Outcome,
                      completed: set[int]) -> None:
        """What follows a record's outcome: its offset may be committed."""
        completed.add(raw.offset)
        await self.delivery.handled(tp, raw, outcome)

    def _may_share(self, tp: TopicPartition, raw: RawRecord, verdict: Verdict) -> bool:
        return (self.shared_runs.enabled and isinstance(verdict, Admitted) and verdict.shares
                and (tp, raw.offset) not in self._retrying)

    async def _handle_run(self, tp: TopicPartition, run: list[tuple[RawRecord, Admitted]],
                          completed: set[int]) -> tuple[RawRecord, Outcome] | None:
        """Handles consecutive records that may share a transaction: as many as possible in
        one, the others alone. A record whose guard found its state moved ends the shared
        transaction (the records before it commit) and is handled alone, as is a record that
        failed in it (all of it rolled back, the records before it alone too; after a
        duplicate, the whole run): its own unit of work decides what its failure means
        (duplicate, retry, dead letter). Returns the record that waits for a retry, if one
        does."""
        i = 0
        while i < len(run):
            done, alone = (await self.shared_runs.together(run[i:]) if len(run) - i > 1
                           else (0, 1))
            for raw, admitted in run[i:i + done]:
                await self._settle(tp, raw,
                                   Outcome("processed", [], admitted.envelope.event_type),
                                   completed)
            i += done
            for raw, admitted in run[i:i + alone]:
                self.shared_runs.ask_for(admitted)
                outcome = await self._alone(tp, raw, admitted)
                if outcome.status == "retry":
                    return raw, outcome
                await self._settle(tp, raw, outcome, completed)
            i += alone
        return None
