"""The closed loop's search for the highest throughput with p99 under the limit.

Throughput rises with the number of clients for as long as the stack has spare CPU and, past
that, for as long as deeper queues make batching pay (shared transactions, relay batches):
at 64 clients a measured run was still well under 1 s at p99 (587 ms). A
fixed list of client counts that ends there reports where the list ends, not where the stack
does. So the search goes on doubling until p99 passes the limit, then bisects between the
last count under it and the first over it.

The deciding is kept apart from the measuring so that it can be tested without a stack.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

MeasureStep = Callable[[int], Awaitable[dict[str, Any]]]


def p99_of(step: dict[str, Any]) -> float:
    return float(step["latency"]["p99_ms"])


def planned(levels: list[int], max_clients: int) -> list[int]:
    """The counts run before any refinement: ``levels``, then doublings of the last of them up
    to ``max_clients``."""
    counts = list(levels)
    c = max(levels, default=0)
    while 0 < c < max_clients:
        c = min(2 * c, max_clients)
        counts.append(c)
    return counts


def next_concurrency(tried: dict[int, float], levels: list[int], *, limit_ms: float,
                     max_clients: int, refinements: int) -> int | None:
    """The next client count to run, given the p99 of each count tried so far; ``None`` when
    the search is over.

    ``levels`` are run in order while p99 stays under ``limit_ms``; past the last of them the
    count doubles, up to ``max_clients``. Once a count has gone over the limit, the gap between
    the highest count under it and the lowest over it above that is halved, at most
    ``refinements`` times and while it is wider than an eighth of the lower count (closer than
    that, the difference is within a run's noise).
    """
    plan = planned(levels, max_clients)
    under = [c for c, p99 in tried.items() if p99 <= limit_ms]
    over = [c for c, p99 in tried.items() if p99 > limit_ms]
    if not over:
        return next((c for c in plan if c not in tried), None)
    if not under:
        return None
    good = max(under)
    bad = min((c for c in over if c > good), default=None)
    refined = sum(1 for c in tried if c not in plan)
    if bad is None or refined >= refinements or bad - good <= max(1, good // 8):
        return None
    mid = (good + bad) // 2
    return mid if mid not in tried else None


async def search(measure: MeasureStep, levels: list[int], *, limit_ms: float = 1000.0,
                 max_clients: int = 512, refinements: int = 2,
                 before_each: Callable[[], Awaitable[Any]] | None = None
                 ) -> list[dict[str, Any]]:
    """Runs ``measure`` for each client count ``next_concurrency`` chooses; returns the steps
    in the order they ran (each as ``measure`` returned it)."""
    steps: list[dict[str, Any]] = []
    tried: dict[int, float] = {}
    while (c := next_concurrency(tried, levels, limit_ms=limit_ms, max_clients=max_clients,
                                 refinements=refinements)) is not None:
        if before_each is not None:
            await before_each()
        step = await measure(c)
        steps.append(step)
        tried[c] = p99_of(step)
    return steps


def best_under(steps: list[dict[str, Any]], limit_ms: float = 1000.0) -> dict[str, Any] | None:
    """The step with the highest throughput among those whose p99 stayed under the limit."""
    under = [s for s in steps if p99_of(s) <= limit_ms]
    return max(under, key=lambda s: s["sagas_per_s"]) if under else None
