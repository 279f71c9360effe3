"""How often one caller may do one thing: a token bucket per key (a customer), ``rate`` a second
sustained and ``burst`` at once. A route asks ``take(key)`` before it does any work and answers
``429`` with ``Retry-After`` when it gets a wait back.

The buckets live in this process: behind a load balancer with N replicas a caller may get up to
N times the rate (enough to stop one client from flooding the service; a shared limit belongs
to the gateway in front). Memory is bounded: past ``max_keys`` callers the one heard from least
recently is forgotten, and a forgotten caller starts again with a full bucket, which only ever
errs towards letting a request through."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    def __init__(self, rate: float, burst: int, *, max_keys: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate above zero and a burst of one at least")
        self.rate = rate
        self.burst = burst
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def take(self, key: str) -> float:
        """0.0 when ``key`` may go ahead (its token is taken); otherwise the seconds until it may."""
        now = self._clock()
        bucket = self._buckets.pop(key, None)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)
        bucket.at = now
        self._buckets[key] = bucket
        if len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate
