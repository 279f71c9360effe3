"""Fault injection for the crash and chaos suites, installed only when a fault setting asks for it.

Each fault wraps a step of the production path rather than being consulted inside it:

- ``SAGA_FAULT_CRASH_AFTER_COMMIT``: the consumer's delivery (``sagakit.consumer.delivery``) is
  wrapped in ``CrashAfterCommit``: SIGKILL right after the local commit of a message of that
  event type, before its offset is recorded.
- ``SAGA_FAULT_DUPLICATE_DELIVERY``, ``SAGA_FAULT_LATE_REDELIVERY``,
  ``SAGA_FAULT_REORDER_DELIVERY``: the delivery is wrapped in ``FaultyDelivery``, which hands
  records over again at once, again later, or swapped, as a misbehaving broker could.
- ``SAGA_FAULT_CRASH_AFTER_PUBLISH``: the relay's handling of Kafka's acknowledgements is
  wrapped (``with_publish_faults``): SIGKILL before the rows are marked published.
"""

from __future__ import annotations

import logging
import os
import random
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from aiokafka import TopicPartition

    from sagakit.consumer.delivery import Delivery, Redeliver
    from sagakit.consumer.records import Outcome, RawRecord
    from sagakit.settings import MessagingSettings

T = TypeVar("T")

log = logging.getLogger("sagakit.faults")


def crash_now(point: str, event_type: str) -> None:
    """SIGKILL this process: no cleanup, no flush, exactly like a crash."""
    log.critical("fault injection: SIGKILL at %s (%s)", point, event_type)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class DeliveryFaults:
    """What a misbehaving broker or network could do to a consumer, injected at the consumer
    (chaos suite): the same record handed over again at once, handed over again later (after
    newer records of its partition), and neighbouring records handed over swapped."""

    duplicate: float = 0.0
    late: float = 0.0
    reorder: float = 0.0
    rng: random.Random = field(default_factory=random.Random)

    @property
    def active(self) -> bool:
        return bool(self.duplicate or self.late or self.reorder)

    def shuffle(self, records: Sequence[T]) -> list[T]:
        out = list(records)
        i = 0
        while i < len(out) - 1:
            if self.rng.random() < self.reorder:
                out[i], out[i + 1] = out[i + 1], out[i]
                i += 2
            else:
                i += 1
        return out

    def again_now(self) -> bool:
        return self.rng.random() < self.duplicate

    def again_later(self) -> bool:
        return self.rng.random() < self.late


class FaultyDelivery:
    """``inner``'s delivery with ``faults``: records swapped before they are handled, handled
    again at once after they are done, or held back and handled again before the partition's
    next batch."""

    def __init__(self, inner: Delivery, faults: DeliveryFaults, redeliver: Redeliver) -> None:
        self._inner = inner
        self._faults = faults
        self._redeliver = redeliver
        self._late: dict[TopicPartition, list[RawRecord]] = {}

    async def hand_over(self, tp: TopicPartition, batch: list[RawRecord]) -> list[RawRecord]:
        for raw in self._late.pop(tp, []):
            outcome = await self._redeliver(raw)
            log.warning("fault injection: late redelivery of %s at offset %s: %s",
                        outcome.event_type, raw.offset, outcome.status)
        return self._faults.shuffle(await self._inner.hand_over(tp, batch))

    async def handled(self, tp: TopicPartition, raw: RawRecord, outcome: Outcome) -> None:
        await self._inner.handled(tp, raw, outcome)
        if outcome.status == "skipped":
            return
        if self._faults.again_now():
            await self._redeliver(raw)
        if self._faults.again_later():
            self._late.setdefault(tp, []).append(raw)


class CrashAfterCommit:
    """``inner``'s delivery, with a SIGKILL once a message of ``event_type`` has committed and
    before its offset is recorded."""

    def __init__(self, inner: Delivery, event_type: str) -> None:
        self._inner = inner
        self._event_type = event_type

    async def hand_over(self, tp: TopicPartition, batch: list[RawRecord]) -> list[RawRecord]:
        return await self._inner.hand_over(tp, batch)

    async def handled(self, tp: TopicPartition, raw: RawRecord, outcome: Outcome) -> None:
        if outcome.status == "processed" and outcome.event_type == self._event_type:
            crash_now("consumer: after commit, before offset commit", self._event_type)
        await self._inner.handled(tp, raw, outcome)


def with_delivery_faults(delivery: Delivery, settings: MessagingSettings,
                         redeliver: Redeliver) -> Delivery:
    """``delivery``, wrapped in the faults ``settings`` ask for (none in production)."""
    faults = DeliveryFaults(settings.fault_duplicate_delivery, settings.fault_late_redelivery,
                            settings.fault_reorder_delivery)
    if faults.active:
        delivery = FaultyDelivery(delivery, faults, redeliver)
    if settings.crash_after_commit:
        delivery = CrashAfterCommit(delivery, settings.crash_after_commit)
    return delivery


class _Published(Protocol):
    @property
    def event_type(self) -> str: ...


P = TypeVar("P", bound=_Published)


def with_publish_faults(acked: Callable[[list[P]], None],
                        settings: MessagingSettings) -> Callable[[list[P]], None]:
    """The relay's ``acked`` step, wrapped in the fault ``settings`` ask for (none in
    production): a SIGKILL when Kafka acknowledged a row of the event type
    ``crash_after_publish`` names, so that the row is published and never marked so."""
    event_type = settings.crash_after_publish
    if not event_type:
        return acked

    def crash_first(rows: list[P]) -> None:
        if any(row.event_type == event_type for row in rows):
            crash_now("relay: after broker ack, before marking published", event_type)
        acked(rows)
    return crash_first
