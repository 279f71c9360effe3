"""This stack against the same saga on DBOS, side by side: every system measured by the same
load generator and observers, in alternating blocks (A B C D, then D C B A, ...) so that the
VM's drift within the run falls on each alike, each block after a warm-up of its own.

A block: open loop at each comparison rate (10 and 50 orders/s), then the closed-loop search
for the highest throughput with p99 under 1 s, the CPU of the system's own parts measured over
each closed-loop window. A system's figures are the median of its blocks.
"""

from __future__ import annotations

import statistics
from typing import Any

import asyncpg

from bench import goals, load, search
from bench.common import admin_dsn
from bench.systems import System, running

RATES = (10.0, 50.0)


async def block(system: System, *, skus: list[str], seconds: float, warm: tuple[float, float],
                closed: list[int], closed_max: int, refinements: int) -> dict[str, Any]:
    if system.is_peer:
        conn = await asyncpg.connect(admin_dsn())
        try:
            await system.stock(conn, skus, 10_000_000)
        finally:
            await conn.close()
    await load.settle()
    print(f"  {system.name}: warm-up at {warm[0]:g}/s for {warm[1]:g}s...", flush=True)
    await load.open_loop(warm[0], warm[1], skus=skus, system=system)
    steps = []
    for rate in RATES:
        await load.settle()
        print(f"  {system.name}: open loop at {rate:g}/s for {seconds:g}s...", flush=True)
        steps.append(await load.open_loop(rate, seconds, skus=skus, system=system))

    async def closed_step(c: int) -> dict[str, Any]:
        print(f"  {system.name}: closed loop with {c} clients...", flush=True)
        return await load.closed_loop(c, seconds, skus, system=system)

    closed_steps = await search.search(closed_step, closed, limit_ms=goals.P99_FOR_THROUGHPUT_MS,
                                       max_clients=closed_max, refinements=refinements,
                                       before_each=load.settle)
    return {"system": system.name, "open_loop": steps, "closed_loop": closed_steps}


async def compare(systems: list[System], *, rounds: int, **block_args: Any) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for r in range(rounds):
        order = systems if r % 2 == 0 else list(reversed(systems))
        for system in order:
            print(f"comparison round {r + 1}/{rounds}: {system.name}...", flush=True)
            with running(system):
                blocks.append({"round": r + 1, **await block(system, **block_args)})
    return {"rounds": rounds, "blocks": blocks,
            "systems": {s.name: summarise([b for b in blocks if b["system"] == s.name])
                        for s in systems}}


def figures(b: dict[str, Any]) -> dict[str, float | None]:
    """One block's headline figures (the contract's ``M`` and the database's writes)."""
    def at(rate: float, key: str) -> float | None:
        step = goals.step_at(b["open_loop"], rate)
        return None if step is None else float(step["latency"][key])

    best = search.best_under(b["closed_loop"], goals.P99_FOR_THROUGHPUT_MS)
    sustained = [s["sustained_sagas_per_s"] for s in b["open_loop"]
                 if s["latency"]["p99_ms"] <= goals.P99_FOR_THROUGHPUT_MS
                 and not s["unfinished"]]
    # Saturated: the closed-loop step with the highest throughput, whatever its latency.
    saturated = max(b["closed_loop"], key=lambda s: s["sagas_per_s"], default=None)
    light = goals.step_at(b["open_loop"], 10.0) or {}

    def sat(key: str) -> float | None:
        value = (saturated or {}).get(key)
        return None if value is None else float(value)

    return {
        "p50_ms_at_10": at(10.0, "p50_ms"),
        "p99_ms_at_50": at(goals.RATE_FOR_LATENCY, "p99_ms"),
        "sagas_per_s_p99_under_1s": float(max(([best["sagas_per_s"]] if best else [])
                                              + sustained, default=0.0)),
        "cpu_ms_per_saga_saturated": sat("cpu_ms_per_saga_total"),
        "commits_per_saga_saturated": sat("commits_per_saga"),
        "wal_bytes_per_saga_saturated": sat("wal_bytes_per_saga"),
        "commits_per_saga_at_10": light.get("commits_per_saga"),
        "wal_bytes_per_saga_at_10": light.get("wal_bytes_per_saga"),
    }


def summarise(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over a system's blocks (None where no block measured it),
    and its CPU a saga by part at saturation from the last block."""
    per_block = [figures(b) for b in blocks]
    keys = per_block[0].keys() if per_block else []
    out: dict[str, Any] = {}
    for key in keys:
        values = [v for f in per_block if (v := f[key]) is not None]
        out[key] = round(statistics.median(values), 2) if values else None
    if blocks:
        saturated = max(blocks[-1]["closed_loop"], key=lambda s: s["sagas_per_s"], default=None)
        out["cpu_ms_per_saga_saturated_by_part"] = (saturated or {}).get("cpu_ms_per_saga")
    out["blocks"] = len(blocks)
    return out
