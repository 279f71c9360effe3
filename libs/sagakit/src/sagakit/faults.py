"""Fault injection points for the crash tests; inert unless their variable is set."""

from __future__ import annotations

import logging
import os
import random
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

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
