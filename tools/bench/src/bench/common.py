"""Shared helpers of the benchmark: percentiles, the stack's processes, DSNs."""

from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from saga_harness import config
from saga_harness.config import ROOT

STATE = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local"))
PARTS = ["postgres", "kafka", "gateway", "pedidos", "inventario", "pagos"]
# Processes the benchmark started itself, by part (a peer system while its block runs).
EXTRA_ROOTS: dict[str, list[psutil.Process]] = {}


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


def instance_pid_files(part: str, run: Path | None = None) -> list[Path]:
    """The pid files of every instance of a part: ``pedidos``, ``pedidos-2``... with
    SAGA_REPLICAS, ``kafka``, ``kafka-2``... with SAGA_KAFKA_BROKERS; the first first."""
    run = run or STATE / "run"
    extra = re.compile(rf"{re.escape(part)}-(\d+)")
    numbered = sorted((int(m.group(1)), p) for p in run.glob(f"{part}-*.pid")
                      if (m := extra.fullmatch(p.stem)))
    first = run / f"{part}.pid"
    return ([first] if first.exists() else []) + [p for _, p in numbered]


def part_roots() -> dict[str, list[psutil.Process]]:
    """The root processes of each part: the postmaster, or the pid in the pid file of each of
    its instances (a part's CPU is that of all its instances: 1 vs 2 replicas, 1 vs 3 brokers
    compare per saga)."""
    found: dict[str, list[psutil.Process]] = {}
    for part in PARTS:
        roots: list[psutil.Process] = []
        if part == "postgres":
            try:
                data = Path((STATE / "pg.location").read_text().strip())
                roots.append(psutil.Process(int((data / "postmaster.pid").read_text().split()[0])))
            except (OSError, psutil.Error, ValueError):
                pass
        for pid_file in ([] if part == "postgres" else instance_pid_files(part)):
            try:
                roots.append(psutil.Process(int(pid_file.read_text())))
            except (OSError, psutil.Error, ValueError):
                continue
        found[part] = roots
    found.update(EXTRA_ROOTS)
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


def sample_instances(roots: list[psutil.Process]) -> PartSample:
    """One part's sample over all its instances (their processes are distinct)."""
    samples = [sample_part(root) for root in roots]
    return PartSample({k: v for s in samples for k, v in s.cpu_s.items()},
                      sum(s.reaped_s for s in samples), sum(s.rss_mb for s in samples))


def sample_cpu() -> CpuSample:
    return CpuSample({part: sample_instances(roots) for part, roots in part_roots().items()})


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
