"""Shared helpers of the benchmark: percentiles, the stack's processes, DSNs."""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harness import config  # noqa: E402

STATE = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local"))
PARTS = ["postgres", "kafka", "gateway", "pedidos", "inventario", "pagos"]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"n": len(ms), "p50_ms": round(pct(ms, 0.5), 2), "p95_ms": round(pct(ms, 0.95), 2),
            "p99_ms": round(pct(ms, 0.99), 2), "max_ms": round(max(ms), 2) if ms else None,
            "mean_ms": round(statistics.fmean(ms), 2) if ms else None}


def admin_dsn() -> str:
    return config.admin_dsn()


def part_processes() -> dict[str, list[psutil.Process]]:
    """Every process of each part: the process group of its pid file, or the postmaster's tree."""
    found: dict[str, list[psutil.Process]] = {}
    for part in PARTS:
        pid_file = STATE / "run" / f"{part}.pid"
        procs: list[psutil.Process] = []
        if part == "postgres":
            data = Path((STATE / "pg.location").read_text().strip())
            try:
                pid = int((data / "postmaster.pid").read_text().split()[0])
                root = psutil.Process(pid)
                procs = [root, *root.children(recursive=True)]
            except (OSError, psutil.Error, ValueError):
                procs = []
        elif pid_file.exists():
            try:
                root = psutil.Process(int(pid_file.read_text()))
                procs = [root, *root.children(recursive=True)]
            except (psutil.Error, ValueError):
                procs = []
        found[part] = procs
    return found


@dataclass
class CpuSample:
    cpu_s: dict[str, float]
    rss_mb: dict[str, float]


def sample_cpu() -> CpuSample:
    cpu: dict[str, float] = {}
    rss: dict[str, float] = {}
    for part, procs in part_processes().items():
        total, mem = 0.0, 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
                mem += p.memory_info().rss / 2**20
            except psutil.Error:
                pass
        cpu[part], rss[part] = total, mem
    return CpuSample(cpu, rss)


def cpu_between(a: CpuSample, b: CpuSample, seconds: float) -> dict[str, Any]:
    """Per part: CPU used as a percentage of one core, and resident memory at the end."""
    return {part: {"cpu_pct_of_core": round(100 * (b.cpu_s[part] - a.cpu_s.get(part, 0))
                                            / seconds, 1),
                   "rss_mb": round(b.rss_mb[part], 1)} for part in b.cpu_s}
