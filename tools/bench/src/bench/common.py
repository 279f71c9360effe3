"""Shared helpers of the benchmark: percentiles, the stack's processes, DSNs."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from saga_harness import config
from saga_harness.config import ROOT

STATE = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local"))
PARTS = ["postgres", "kafka", "gateway", "pedidos", "inventario", "pagos"]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary_ms(seconds: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in seconds]
    return {"n": len(ms), "p50_ms": round(pct(ms, 0.5), 2), "p95_ms": round(pct(ms, 0.95), 2),
            "p99_ms": round(pct(ms, 0.99), 2), "max_ms": round(max(ms), 2) if ms else None,
            "mean_ms": round(statistics.fmean(ms), 2) if ms else None}


def admin_dsn() -> str:
    return config.admin_dsn()


def part_roots() -> dict[str, psutil.Process | None]:
    """The root process of each part: the postmaster, or the pid in the part's pid file."""
    found: dict[str, psutil.Process | None] = {}
    for part in PARTS:
        pid_file = STATE / "run" / f"{part}.pid"
        root: psutil.Process | None = None
        try:
            if part == "postgres":
                data = Path((STATE / "pg.location").read_text().strip())
                root = psutil.Process(int((data / "postmaster.pid").read_text().split()[0]))
            elif pid_file.exists():
                root = psutil.Process(int(pid_file.read_text()))
        except (OSError, psutil.Error, ValueError):
            root = None
        found[part] = root
    return found


@dataclass
class PartSample:
    """One part's processes at one instant: CPU seconds of each live process (by pid and start
    time, so a reused pid is another process), and what the root has reaped of its children."""

    cpu_s: dict[tuple[int, float], float]
    reaped_s: float
    rss_mb: float


@dataclass
class CpuSample:
    parts: dict[str, PartSample]


def sample_part(root: psutil.Process | None) -> PartSample:
    if root is None:
        return PartSample({}, 0.0, 0.0)
    cpu: dict[tuple[int, float], float] = {}
    rss = reaped = 0.0
    try:
        procs = [root, *root.children(recursive=True)]
        t = root.cpu_times()
        reaped = t.children_user + t.children_system
    except psutil.Error:
        return PartSample({}, 0.0, 0.0)
    for p in procs:
        try:
            with p.oneshot():
                t = p.cpu_times()
                cpu[(p.pid, p.create_time())] = t.user + t.system
                rss += p.memory_info().rss / 2**20
        except psutil.Error:
            pass
    return PartSample(cpu, reaped, rss)


def sample_cpu() -> CpuSample:
    return CpuSample({part: sample_part(root) for part, root in part_roots().items()})


def cpu_seconds_between(a: PartSample, b: PartSample) -> float:
    """CPU a part used between two samples, also by processes that started or ended in
    between. PostgreSQL runs a backend per connection: a backend that worked before the first
    sample and exited before the second would otherwise take its whole past off the total
    (PostgreSQL then showed at 1-3 % of a core at saturation). An exited child's
    lifetime CPU reaches its parent's "children" times when reaped; what it had used by the
    first sample is taken off again."""
    live = sum(t - a.cpu_s.get(key, 0.0) for key, t in b.cpu_s.items())
    exited_before = sum(t for key, t in a.cpu_s.items() if key not in b.cpu_s)
    return max(0.0, live + (b.reaped_s - a.reaped_s) - exited_before)


def cpu_between(a: CpuSample, b: CpuSample, seconds: float) -> dict[str, Any]:
    """Per part: CPU used as a percentage of one core, and resident memory at the end."""
    empty = PartSample({}, 0.0, 0.0)
    return {part: {"cpu_pct_of_core": round(100 * cpu_seconds_between(a.parts.get(part, empty),
                                                                       pb) / seconds, 1),
                   "rss_mb": round(pb.rss_mb, 1)} for part, pb in b.parts.items()}
