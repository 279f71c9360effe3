"""How a partition's fetched records are handed to its handling, and what follows each one
handled: in production, every record once, in partition order (``InOrder``).

The seam exists for fault injection: the crash and chaos suites wrap it
(``sagakit.faults.with_delivery_faults``) to repeat, hold back, swap records or kill the process
after a commit, and only when a fault setting asks for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from aiokafka import TopicPartition

from sagakit.consumer.records import Outcome, RawRecord

Redeliver = Callable[[RawRecord], Awaitable[Outcome]]
"""Handles a record again, alone, until decided (the faults' duplicates)."""


class Delivery(Protocol):
    async def hand_over(self, tp: TopicPartition, batch: list[RawRecord]) -> list[RawRecord]:
        """The records of ``batch`` in the order they are to be handled."""
        ...

    async def handled(self, tp: TopicPartition, raw: RawRecord, outcome: Outcome) -> None:
        """``raw`` is done (its offset may be committed): called once per record."""
        ...


class InOrder:
    """What Kafka does: each record once, in partition order."""

    async def hand_over(self, tp: TopicPartition, batch: list[RawRecord]) -> list[RawRecord]:
        return batch

    async def handled(self, tp: TopicPartition, raw: RawRecord, outcome: Outcome) -> None:
        return None
