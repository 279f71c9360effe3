"""The closed loop's search: it goes past the listed client counts while p99
stays under the limit, bisects between the last count under it and the first over it, and
stops. A fake stack stands in for the real one: throughput rises with clients up to a
ceiling, and latency is clients over throughput (Little's law)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import search

LEVELS = [2, 4, 8, 16, 32, 64]


def fake_stack(ceiling: float, per_client: float = 8.0):
    ran: list[int] = []

    async def measure(c: int) -> dict[str, Any]:
        ran.append(c)
        rate = min(ceiling, per_client * c)
        latency_ms = 1000.0 * c / rate
        return {"concurrency": c, "sagas_per_s": rate,
                "latency": {"p50_ms": latency_ms, "p99_ms": 1.6 * latency_ms}}

    return measure, ran


async def test_the_search_goes_past_the_listed_counts_while_p99_stays_under_the_limit() -> None:
    # 200/s at most: 64 clients wait 320 ms at p50 (p99 512), 128 clients 1024 ms at p99.
    measure, ran = fake_stack(ceiling=200.0)
    steps = await search.search(measure, LEVELS, limit_ms=1000.0, max_clients=512,
                                refinements=2)
    assert ran[:6] == LEVELS
    assert ran[6] == 128  # doubled past the list: 64 was well under the limit
    assert ran[7:] == [96, 112]  # two bisections between 64 (under) and 128 (over)
    best = search.best_under(steps)
    assert best is not None and best["sagas_per_s"] == 200.0
    assert search.p99_of(best) <= 1000.0


async def test_the_search_stops_at_the_first_count_over_the_limit_within_the_list() -> None:
    measure, ran = fake_stack(ceiling=20.0)  # 16 clients: 800 ms p50, 1280 p99
    steps = await search.search(measure, LEVELS, limit_ms=1000.0, max_clients=512,
                                refinements=2)
    assert 32 not in ran and 64 not in ran
    assert ran[:4] == [2, 4, 8, 16] and all(8 < c < 16 for c in ran[4:])
    best = search.best_under(steps)
    assert best is not None and best["concurrency"] < 16


def test_the_doubling_stops_at_the_largest_count_allowed() -> None:
    tried = {c: 100.0 for c in [*LEVELS, 128, 256]}
    assert search.next_concurrency(tried, LEVELS, limit_ms=1000.0, max_clients=300,
                                   refinements=2) == 300
    tried[300] = 200.0
    assert search.next_concurrency(tried, LEVELS, limit_ms=1000.0, max_clients=300,
                                   refinements=2) is None


def test_no_refinement_when_the_gap_is_within_noise_or_none_asked() -> None:
    tried = {2: 100.0, 4: 1500.0}
    # 2 → 4 is wider than an eighth of 2 clients: one bisection at 3.
    assert search.next_concurrency(tried, [2, 4], limit_ms=1000.0, max_clients=8,
                                   refinements=2) == 3
    assert search.next_concurrency(tried, [2, 4], limit_ms=1000.0, max_clients=8,
                                   refinements=0) is None
    close = {64: 900.0, 68: 1100.0}
    assert search.next_concurrency(close, [64, 68], limit_ms=1000.0, max_clients=512,
                                   refinements=2) is None


def test_nothing_under_the_limit_means_nothing_to_refine() -> None:
    assert search.next_concurrency({2: 1500.0}, LEVELS, limit_ms=1000.0, max_clients=512,
                                   refinements=2) is None
    assert search.best_under([{"concurrency": 2, "sagas_per_s": 1.0,
                               "latency": {"p99_ms": 1500.0}}]) is None


def test_the_terminal_watch_polls_at_a_fiftieth_of_the_latency_it_sees_within_bounds() -> None:
    from bench.load import TerminalWatch

    watch = TerminalWatch(min_interval_s=0.005, max_interval_s=0.025)
    assert watch.interval_s == 0.005
    watch._seen(0.5)  # half a second a saga: 10 ms between queries
    assert watch.interval_s == pytest.approx(0.010)
    for _ in range(100):
        watch._seen(3.0)
    assert watch.interval_s == 0.025  # bounded above
    for _ in range(200):
        watch._seen(0.02)
    assert watch.interval_s == 0.005  # and below


def test_the_closed_loops_ramp_is_left_out_of_its_latency_and_its_throughput() -> None:
    from bench.load import steady_window

    finished = [
        (0.0, 1.5, "burst"),         # placed in the ramp: neither measured nor counted
        (0.1, 2.5, "ramp-ends-in"),  # placed in the ramp, ended in the window: counted
        (2.0, 2.4, "first"),         # placed at the window's start
        (11.5, 12.8, "tail"),        # placed in the window, ended after it: measured only
        (12.0, 12.3, "after"),       # placed after the window (a client's last): neither
    ]
    placed, ended = steady_window(finished, measure_from=2.0, stop_at=12.0)
    assert placed == ["first", "tail"]
    assert ended == 2  # "ramp-ends-in" and "first"
