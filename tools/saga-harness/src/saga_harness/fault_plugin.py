"""Fault injection for the crash and chaos suites: a plugin of sagakit (``sagakit.plugins``)
that a service loads only when ``SAGA_PLUGINS`` names it, as ``env`` does for a test's restart.
Production never names it, and the services' images do not contain this package.

Each fault wraps a seam of the production path rather than being consulted inside it, and only
when its setting (``FaultSettings``) asks for it:

- ``SAGA_FAULT_CRASH_AFTER_COMMIT``: the consumer's delivery (``sagakit.consumer.delivery``) is
  wrapped in ``CrashAfterCommit``: SIGKILL right after the local commit of a message of that
  event type, before its offset is recorded (the crash tests, the standard's first failure
  scenario).
- ``SAGA_FAULT_DUPLICATE_DELIVERY``, ``SAGA_FAULT_LATE_REDELIVERY``,
  ``SAGA_FAULT_REORDER_DELIVERY``: the delivery is wrapped in ``FaultyDelivery``, which hands
  records over again at once, again later, or swapped, as a misbehaving broker could
  (probabilities, 0 = off).
- ``SAGA_FAULT_CRASH_AFTER_PUBLISH``: the relay's handling of Kafka's acknowledgements is
  wrapped (``wrap_acked``): SIGKILL before the rows are marked published.
"""

from __future__ import annotations

import logging
import os
import random
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from aiokafka import TopicPartition

    from sagakit.consumer import Outcome, RawRecord
    from sagakit.consumer.delivery import Delivery, Redeliver

T = TypeVar("T")

log = logging.getLogger("saga_harness.fault_plugin")

PLUGIN = __name__
"""What ``SAGA_PLUGINS`` names to load this plugin."""


class FaultSettings(BaseSettings):
    """The faults a service with this plugin injects; none by default."""

    model_config = SettingsConfigDict(env_prefix="SAGA_FAULT_", extra="ignore")

    crash_after_commit: str | None = Field(None, description=(
        "Crash tests only: the consumer kills itself (SIGKILL) right after committing a "
        "message of this event type, before its offset is committed."))
    crash_after_publish: str | None = Field(None, description=(
        "Crash tests only: the relay kills itself (SIGKILL) right after Kafka acknowledged a "
        "row of this event type, before the row is marked published."))
    duplicate_delivery: float = Field(0.0, ge=0, le=1, description=(
        "Chaos suite only: probability that a record is handled twice in a row (0: off)."))
    late_redelivery: float = Field(0.0, ge=0, le=1, description=(
        "Chaos suite only: probability that a record is handled again after newer records "
        "(0: off)."))
    reorder_delivery: float = Field(0.0, ge=0, le=1, description=(
        "Chaos suite only: probability that two neighbouring records are handled swapped "
        "(0: off)."))


def env(**faults: str | float) -> dict[str, str]:
    """The environment a part is (re)started with to inject ``faults`` (``FaultSettings``'
    field names): this plugin named in ``SAGA_PLUGINS``, and each fault's variable."""
    unknown = set(faults) - set(FaultSettings.model_fields)
    if unknown:
        raise ValueError(f"no such fault: {', '.join(sorted(unknown))}")
    return {"SAGA_PLUGINS": PLUGIN,
            **{f"SAGA_FAULT_{name.upper()}": str(value) for name, value in faults.items()}}


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


def wrap_delivery(delivery: Delivery, redeliver: Redeliver,
                  settings: FaultSettings | None = None) -> Delivery:
    """The plugin's hook: ``delivery``, wrapped in the faults ``settings`` (by default the
    process's environment) ask for."""
    settings = settings or FaultSettings()
    faults = DeliveryFaults(settings.duplicate_delivery, settings.late_redelivery,
                            settings.reorder_delivery)
    if faults.active:
        delivery = FaultyDelivery(delivery, faults, redeliver)
    if settings.crash_after_commit:
        delivery = CrashAfterCommit(delivery, settings.crash_after_commit)
    return delivery


class _Published(Protocol):
    @property
    def event_type(self) -> str: ...


P = TypeVar("P", bound=_Published)


def wrap_acked(acked: Callable[[list[P]], None],
               settings: FaultSettings | None = None) -> Callable[[list[P]], None]:
    """The plugin's hook: the relay's ``acked`` step, wrapped in the fault ``settings`` (by
    default the process's environment) ask for: a SIGKILL when Kafka acknowledged a row of the
    event type ``crash_after_publish`` names, so that the row is published and never marked
    so."""
    event_type = (settings or FaultSettings()).crash_after_publish
    if not event_type:
        return acked

    def crash_first(rows: list[P]) -> None:
        if any(row.event_type == event_type for row in rows):
            crash_now("relay: after broker ack, before marking published", event_type)
        acked(rows)
    return crash_first
