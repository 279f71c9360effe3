"""One caller's requests: a burst at once, then the sustained rate; other callers unaffected;
memory bounded by the callers kept."""

from __future__ import annotations

import pytest

from sagakit.runtime.rate_limit import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.take("c-1") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("c-1") == pytest.approx(0.5)
    clock.now += 0.5
    assert limiter.take("c-1") == 0.0
    assert limiter.take("c-1") == pytest.approx(0.5)


def test_a_refused_request_takes_nothing() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=1.0, burst=1, clock=clock)
    assert limiter.take("c-1") == 0.0
    assert limiter.take("c-1") == pytest.approx(1.0)
    clock.now += 0.5
    assert limiter.take("c-1") == pytest.approx(0.5)
    clock.now += 0.5
    assert limiter.take("c-1") == 0.0


def test_another_caller_has_its_own_bucket() -> None:
    limiter = RateLimiter(rate=1.0, burst=1, clock=Clock())
    assert limiter.take("c-1") == 0.0
    assert limiter.take("c-1") > 0
    assert limiter.take("c-2") == 0.0


def test_a_quiet_caller_refills_up_to_the_burst_only() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=1.0, burst=2, clock=clock)
    limiter.take("c-1")
    clock.now += 3600
    assert [limiter.take("c-1") for _ in range(3)][:2] == [0.0, 0.0]
    assert limiter.take("c-1") > 0


def test_memory_keeps_the_callers_heard_from_last() -> None:
    limiter = RateLimiter(rate=1.0, burst=1, max_keys=2, clock=Clock())
    for key in ("a", "b", "c"):
        limiter.take(key)
    assert list(limiter._buckets) == ["b", "c"]
    assert limiter.take("a") == 0.0, "a forgotten caller starts with a full bucket"
    assert limiter.take("c") > 0
