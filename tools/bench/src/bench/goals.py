"""The goals, judged on one run's results: met, or missed and by how much.

They are ratios to what a Python team would pick instead, measured in the same run: the same
saga on DBOS Transact (``systems``, the best of its shapes for each figure), and to the floor
the machine sets. Absolute figures on a shared virtual machine move by ×2 from hour to hour; a ratio of two
systems measured in alternating blocks of the same run does not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

RATE_FOR_LATENCY = 50.0
P99_FOR_THROUGHPUT_MS = 1000.0
IDLE_LIMIT_PCT = 5.0
# An open-loop step "sustains" its rate when this share of it completed within the step.
SUSTAINED_SHARE = 0.95

# The goals against the best peer shape and the floor.
THROUGHPUT_VS_PEER = 2.0     # sagas/s with p99 < 1 s: at least this multiple of the peer's
P50_VS_PEER = 1.0            # p50 at 10/s: at most this multiple of the peer's
P50_VS_PACED_FLOOR = 1.2     # p50 at 10/s: at most this multiple of the paced floor
CPU_VS_PEER = 0.75           # CPU a saga at saturation: at most this multiple of the peer's

# Which figure of ``systems.<name>`` each goal reads, and whether more of it is better.
FIGURES: dict[str, tuple[str, bool]] = {
    "p50_ms_at_10": ("p50 at 10/s (ms)", False),
    "p99_ms_at_50": ("p99 at 50/s (ms)", False),
    "sagas_per_s_p99_under_1s": ("sagas/s with p99 < 1 s", True),
    "cpu_ms_per_saga_saturated": ("CPU ms a saga, saturated", False),
    "commits_per_saga_saturated": ("commits a saga, saturated", False),
    "wal_bytes_per_saga_saturated": ("WAL bytes a saga, saturated", False),
}


@dataclass(frozen=True)
class Goal:
    name: str
    target: str
    measured: str
    met: bool
    missed_by: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _factor(x: float) -> str:
    return f"×{x:.2f}"


def best_peer(systems: dict[str, dict[str, Any]], figure: str
              ) -> tuple[str, float] | None:
    """The peer shape with the best value of ``figure`` (the lowest, or the highest when
    more is better), and that value; None without a peer that measured it."""
    higher = FIGURES[figure][1]
    measured = [(name, float(m[figure])) for name, m in systems.items()
                if name != "this" and m.get(figure) is not None]
    if not measured:
        return None
    pick: Callable[..., tuple[str, float]] = max if higher else min
    return pick(measured, key=lambda nv: nv[1])


def ratio_to_peer(results: dict[str, Any], figure: str) -> float | None:
    systems = results.get("systems") or {}
    this = (systems.get("this") or {}).get(figure)
    best = best_peer(systems, figure)
    if this is None or best is None or not best[1]:
        return None
    return float(this) / best[1]


def _against_peer(results: dict[str, Any], figure: str, limit: float, *, at_least: bool
                  ) -> Goal:
    label = FIGURES[figure][0]
    sign = "≥" if at_least else "≤"
    name = f"{label}: {sign} {limit:g}× the best DBOS shape"
    systems = results.get("systems") or {}
    this = (systems.get("this") or {}).get(figure)
    best = best_peer(systems, figure)
    if this is None or best is None:
        return Goal(name, f"{sign} {limit:g}×", "not measured (no peer, or no figure)", False,
                    "not measured")
    ratio = float(this) / best[1] if best[1] else float("inf")
    measured = f"this {float(this):g}, {best[0]} {best[1]:g}: {_factor(ratio)}"
    met = ratio >= limit if at_least else ratio <= limit
    if met:
        return Goal(name, f"{sign} {limit:g}×", measured, True)
    return Goal(name, f"{sign} {limit:g}×", measured, False,
                _factor(limit / ratio if at_least and ratio else ratio / limit))


def throughput_vs_peer(results: dict[str, Any]) -> Goal:
    return _against_peer(results, "sagas_per_s_p99_under_1s", THROUGHPUT_VS_PEER, at_least=True)


def latency_vs_peer(results: dict[str, Any]) -> Goal:
    return _against_peer(results, "p50_ms_at_10", P50_VS_PEER, at_least=False)


def cpu_vs_peer(results: dict[str, Any]) -> Goal:
    return _against_peer(results, "cpu_ms_per_saga_saturated", CPU_VS_PEER, at_least=False)


def latency_vs_floor(results: dict[str, Any]) -> Goal:
    name = f"p50 at 10/s: ≤ {P50_VS_PACED_FLOOR:g}× the paced floor"
    paced = results.get("floor_one_saga_paced_ms")
    this = ((results.get("systems") or {}).get("this") or {}).get("p50_ms_at_10")
    if this is None or not paced:
        return Goal(name, f"≤ {P50_VS_PACED_FLOOR:g}×", "not measured", False, "not measured")
    ratio = float(this) / float(paced)
    measured = (f"{float(this):.1f} ms against a paced floor of {float(paced):.1f} ms: "
                f"{_factor(ratio)} ({float(this) / float(results['floor_one_saga_ms']):.1f}× "
                f"the back-to-back floor)")
    if ratio <= P50_VS_PACED_FLOOR:
        return Goal(name, f"≤ {P50_VS_PACED_FLOOR:g}×", measured, True)
    return Goal(name, f"≤ {P50_VS_PACED_FLOOR:g}×", measured, False,
                _factor(ratio / P50_VS_PACED_FLOOR))


def idle(results: dict[str, Any]) -> Goal:
    pct = float(results["idle"]["total_pct_of_core"])
    name = f"idle stack < {IDLE_LIMIT_PCT:g} % of one core"
    measured = f"{pct:g} %"
    if pct < IDLE_LIMIT_PCT:
        return Goal(name, f"< {IDLE_LIMIT_PCT:g} %", measured, True)
    return Goal(name, f"< {IDLE_LIMIT_PCT:g} %", measured, False,
                f"{pct - IDLE_LIMIT_PCT:.1f} points ({_factor(pct / IDLE_LIMIT_PCT)})")


def reserve_without_contention(results: dict[str, Any]) -> Goal:
    """reserve_then_pay's throughput with stock to spare, against Check-Then-Pay's in the same
    run (``bench/burst.py``): holding units must not cost the saga its speed."""
    nc = (results.get("burst") or {}).get("no_contention") or {}
    share = (nc.get("share_of_check_then_pay") or {}).get("reserve_then_pay")
    goal = float(nc.get("goal_share", 0.9))
    name = f"reserve_then_pay without contention: ≥ {goal:g}× check_then_pay's sagas/s"
    if share is None:
        return Goal(name, f"≥ {goal:g}×", "not measured (BENCH_STRATEGIES without both)",
                    False, "not measured")
    by = nc["by_strategy"]
    measured = (f"reserve_then_pay {by['reserve_then_pay']['sagas_per_s']:g}, check_then_pay "
                f"{by['check_then_pay']['sagas_per_s']:g}: {_factor(share)}")
    if share >= goal:
        return Goal(name, f"≥ {goal:g}×", measured, True)
    return Goal(name, f"≥ {goal:g}×", measured, False,
                _factor(goal / share) if share else "no saga completed")


def evaluate(results: dict[str, Any]) -> list[Goal]:
    return [throughput_vs_peer(results), latency_vs_peer(results), latency_vs_floor(results),
            cpu_vs_peer(results), idle(results), reserve_without_contention(results)]


def step_at(steps: list[dict[str, Any]], rate: float | None = None) -> dict[str, Any] | None:
    """The open-loop step offered ``rate``; without one, the busiest (the highest rate)."""
    if rate is not None:
        return next((o for o in steps if o["target_rate_per_s"] == rate), None)
    return max(steps, key=lambda o: o["target_rate_per_s"]) if steps else None


def hottest(steps: list[dict[str, Any]], parts: tuple[str, ...], rate: float | None = None
            ) -> tuple[str, float] | None:
    """Of ``parts``, the one that spent the most CPU per completed saga in the step offered
    ``rate``, by default the busiest step (where a throughput goal is lost)."""
    step = step_at(steps, rate)
    if step is None:
        return None
    per_saga = step.get("cpu_ms_per_saga") or {}
    candidates = [(p, per_saga[p]) for p in parts if p in per_saga]
    return max(candidates, key=lambda pc: pc[1]) if candidates else None
