"""How a partition's fetched records are handed to its handling, and what follows each one
handled: in production, every record once, in partition order (``InOrder``).

A seam plugins may wrap (``sagakit.plugins``): the crash and chaos suites' fault plugin repeats,
holds back or swaps records, or kills the process after a commit. Production names no plugin,
and hands records over as they came.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from aiokafka import TopicPartition

from sagakit.consumer.records import Outcome, RawRecord

Redeliver = Callable[[RawRecord], Awaitable[Outcome]]
"""Handles a record again, alone, until decided (a plugin's duplicates)."""


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
