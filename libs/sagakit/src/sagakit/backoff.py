"""Exponential backoff with jitter, computed by the application so it can be stored."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    initial_s: float
    factor: float
    cap_s: float
    jitter: float = 0.2  # ±20 %: the standard asks for 10-25 %

    def nominal(self, retry: int) -> float:
        """Wait before retry number ``retry`` (1 = the wait after the first failed attempt)."""
        return min(self.initial_s * self.factor ** (retry - 1), self.cap_s)

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        u = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, self.nominal(retry) * (1 + u))
