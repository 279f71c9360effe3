"""`make bench`: baselines, relay vs raw producer, open-loop rates, contention, closed loop,
bursts under each allocation strategy, idle cost. Prints a table and writes, under
bench-results/ (git-ignored), every figure to bench-<UTC timestamp>.json, the same to
latest.json (with the headline figures under "floor" and "systems", see ``headline``, and the
bursts under "burst"), a latency plot to latency-<UTC timestamp>.png and the bursts' plot to
burst-<UTC timestamp>.png.

Environment: BENCH_RATES (default 10,50,100,200), BENCH_SECONDS per rate (default 10),
BENCH_PRODUCTS the orders are spread over (default 50; 1 = every order for the same product),
BENCH_CLOSED_LOOP (default 2,4,8,16,32,64: the client counts tried first; the search then
doubles the last until p99 passes 1 s, up to BENCH_CLOSED_LOOP_MAX, default 512, and bisects
between the last count under 1 s and the first over it), BENCH_PEERS (default
dbos,dbos_async,dbos_per_core,dbos_queue; empty: no comparison), BENCH_ROUNDS (the comparison's rounds of
alternating blocks, default 2), BENCH_QUICK=1 for a short smoke run of the same comparison;
for the bursts (bench/burst.py) BENCH_STRATEGIES (default check_then_pay,reserve_then_pay,auto),
BENCH_BURST_ORDERS (orders a burst, default 40) and BENCH_BURST_ROUNDS (default 2).
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import psutil

from bench import (
    baselines,
    burst,
    burst_report,
    compare,
    goals,
    load,
    pg_statements,
    profile,
    relay_bench,
    report,
    search,
    systems,
)
from bench.common import ROOT, admin_dsn, part_roots
from saga_harness import replicas
from saga_harness.identity import StackAuth

OUT = ROOT / "bench-results"


def machine() -> dict[str, Any]:
    return {"cores": psutil.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30),
            "cpu": platform.processor() or platform.machine(), "kernel": platform.release(),
            "python": platform.python_version(),
            # The server's version (the pin the stack runs), not the Debian client's.
            "postgres": (ROOT / "deploy/postgres-version").read_text().strip(),
            "kafka": f"{(ROOT / 'deploy/kafka-version').read_text().strip()} (KRaft, "
                     f"{replicas.kafka_brokers()} node(s))",
            # What the stack ran as: compare runs of 1 and 2 replicas, 1 and 3 brokers.
            "replicas": replicas.replicas(), "kafka_brokers": replicas.kafka_brokers(),
            "date": datetime.now(UTC).isoformat(timespec="seconds")}



async def main() -> None:
    quick = os.environ.get("BENCH_QUICK") == "1"
    rates = [float(r) for r in os.environ.get("BENCH_RATES", "10,50" if quick
                                                 else "10,50,100,200").split(",")]
    seconds = float(os.environ.get("BENCH_SECONDS", "4" if quick else "10"))
    closed = [int(c) for c in os.environ.get("BENCH_CLOSED_LOOP", "4,16" if quick
                                             else "2,4,8,16,32,64").split(",")]
    # Past the listed counts the closed loop doubles until p99 passes 1 s (bench/search.py).
    closed_max = int(os.environ.get("BENCH_CLOSED_LOOP_MAX", "16" if quick else "512"))
    products = int(os.environ.get("BENCH_PRODUCTS", "50"))
    peers = [systems.peer(name) for name in os.environ.get(
        "BENCH_PEERS", ",".join(systems.PEER_SHAPES)).split(",") if name]
    rounds = int(os.environ.get("BENCH_ROUNDS", "1" if quick else "2"))
    results: dict[str, Any] = {"machine": machine(), "products": products}
    bursts = burst.Settings.from_env(quick)
    # A stack without the strategies asked for fails here, not after an hour of measuring.
    await burst.preflight(bursts.strategies)
    # The floor three times: at the start, after the warm-up and at the end; the fastest of
    # each baseline is the floor (baselines.fastest). A measurement on a cold broker or in a
    # slow while of the VM is slower, never faster, than what the machine can do.
    await load.settle()
    measurements = [await measure_floor("at the start", quick)]
    print("relay vs raw producer...", flush=True)
    results["relay"] = await relay_bench.relay_vs_raw(n=2000 if quick else 5000)
    load.authenticate()
    async with httpx.AsyncClient(auth=StackAuth()) as http:
        # A catalogue, not one product: allocation locks a product's row until its commit (FOR
        # UPDATE, docs/standard.md#inventario-validation-and-allocation), so orders that all want
        # one product queue on that row. The contention scenario below is the one-product case.
        run_id = uuid.uuid4().hex[:8]
        skus = [f"BENCH-{run_id}-{i:03d}" for i in range(products)]
        for sku in skus:
            await load.set_stock(http, sku, 10_000_000)
        # Every run adds its products to the catalogue and its sagas to tables kept for days,
        # and statements may cost more as they grow (the allocation's update once did,
        # bench/pg_statements.py): runs are compared knowing.
        results["stack_state"] = await load.stack_state()
        # A warm-up like a stack in service has had: right after a Kafka restart the broker
        # took 39 % of a core at 10 orders/s, 23 % a minute later, 11 % after a full run
        # (JIT). This warm-up alone did not bring the 10/s step down.
        warm_rate, warm_s = (10, 2) if quick else (25, 20)
        print(f"warm-up: {warm_rate} orders/s for {warm_s}s...", flush=True)
        await load.open_loop(warm_rate, warm_s, skus=skus)
        # After the warm-up the broker and database are the warm ones the open loop meets (run
        # 13 measured the floor only right after a broker restart: Kafka's hop 1.9 ms instead
        # of 0.8, which made the floor, not the stack, look slower).
        await load.settle()
        measurements.append(await measure_floor("after the warm-up", quick))
        results["open_loop"] = []
        for rate in rates:
            settled = await load.settle()
            print(f"open loop at {rate:g} orders/s for {seconds:g}s "
                  f"(stack quiet after {settled:g}s)...", flush=True)
            r = await load.open_loop(rate, seconds, skus=skus)
            r["settled_after_s"] = settled
            results["open_loop"].append(r)
        hot = f"BENCH-HOT-{uuid.uuid4().hex[:6]}"
        await load.set_stock(http, hot, 10)
        await load.settle()
        print("contention: 100 orders for 10 units at 50/s...", flush=True)
        results["contention"] = await load.open_loop(50, 2, skus=[hot])

        async def closed_step(c: int) -> dict[str, Any]:
            print(f"closed loop with {c} clients...", flush=True)
            return await load.closed_loop(c, seconds, skus)

        results["closed_loop"] = await search.search(
            closed_step, closed, limit_ms=goals.P99_FOR_THROUGHPUT_MS,
            max_clients=closed_max, refinements=0 if quick else 2, before_each=load.settle)
        await load.settle()
        # Bursts for a few units under each strategy, and each strategy's throughput without
        # contention at the clients that gave the highest throughput with p99 under 1 s.
        best = search.best_under(results["closed_loop"], goals.P99_FOR_THROUGHPUT_MS)
        results["burst"] = await burst.scenario(
            bursts, clients=best["concurrency"] if best else burst.NO_CONTENTION_CLIENTS,
            seconds=seconds, products=products)
        await load.settle()
        at_goal = goals.step_at(results["open_loop"], goals.RATE_FOR_LATENCY)
        if (at_goal is not None and at_goal is not goals.step_at(results["open_loop"])
                and not quick):
            # Where the time goes at 50/s: a stack at 50/s handles each message alone, and
            # spends its time otherwise than at saturation.
            results["profile_at_latency_goal"] = await profile_hot_service(
                results["open_loop"], skus, 5 if quick else 15, goals.RATE_FOR_LATENCY)
            await load.settle()
        results["profile"] = await profile_hot_service(results["open_loop"], skus,
                                                       5 if quick else 15)
        if peers:
            # This stack and each DBOS shape, side by side: the figures of ``systems``.
            results["comparison"] = await compare.compare(
                [systems.this_stack(), *peers], rounds=rounds, skus=skus, seconds=seconds,
                warm=(10, 2) if quick else (25, 10), closed=closed, closed_max=closed_max,
                refinements=0 if quick else 1)
    # Idle last, once the load is over and the stack has settled (JIT-compiled Kafka, no
    # autovacuum or checkpoint from the runs above still going): what a quiet stack costs.
    print("idle stack (after the database's upkeep of the load)...", flush=True)
    await asyncio.sleep(10 if quick else 30)
    upkept = await load.database_maintenance_done()
    results["idle"] = {**await load.idle_cpu(10 if quick else 30), **upkept}
    measurements.append(await measure_floor("after the load and the idle window", quick))
    with_floor(results, measurements)
    best_closed = search.best_under(results["closed_loop"], goals.P99_FOR_THROUGHPUT_MS)
    results["max_sustained_sagas_per_s_p99_under_1s"] = max(
        ([best_closed["sagas_per_s"]] if best_closed else [])
        + [r["sustained_sagas_per_s"] for r in results["open_loop"]
           if r["latency"]["p99_ms"] <= goals.P99_FOR_THROUGHPUT_MS and r["unfinished"] == 0]
        or [0])
    results.update(headline(results))
    results["goals"] = [g.as_dict() for g in goals.evaluate(results)]
    OUT.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = OUT / f"bench-{stamp}.json"
    path.write_text(json.dumps(results, indent=2))
    (OUT / "latest.json").write_text(json.dumps(results, indent=2))
    report.plot(results, OUT / f"latency-{stamp}.png")
    burst_report.plot(results, OUT / f"burst-{stamp}.png")
    report.report(results)
    print(f"\nresults: {path} (and {OUT / 'latest.json'})")


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The figures everything outside the project reads from latest.json: the machine's floor
    and, for each system measured in the run, p50 at 10 orders/s, p99 at 50, the highest rate
    with p99 under 1 s and the CPU a saga costs saturated (every part of the system, the load
    generator not counted). With the comparison, every system's figures come from its
    alternating blocks (bench/compare.py), this stack's included; without it, this stack's
    from the run above (CPU at the highest rate offered). A figure the run did not measure
    (no step at that rate) is None."""
    floor = headline_floor(results)
    compared = (results.get("comparison") or {}).get("systems")
    if compared:
        return {"floor": floor, "systems": {
            name: {k: v for k, v in m.items() if k != "blocks"} for name, m in compared.items()}}

    def latency(rate: float, key: str) -> float | None:
        step = goals.step_at(results.get("open_loop", []), rate)
        return None if step is None else float(step["latency"][key])

    busiest = goals.step_at(results.get("open_loop", []))
    per_saga = (busiest or {}).get("cpu_ms_per_saga") or {}
    return {
        "floor": floor,
        "systems": {"this": {
            "p50_ms_at_10": latency(10.0, "p50_ms"),
            "p99_ms_at_50": latency(goals.RATE_FOR_LATENCY, "p99_ms"),
            "sagas_per_s_p99_under_1s": float(
                results.get("max_sustained_sagas_per_s_p99_under_1s") or 0),
            "cpu_ms_per_saga_saturated": (round(sum(per_saga.values()), 2) if per_saga
                                          else None)}},
    }


def headline_floor(results: dict[str, Any]) -> dict[str, Any]:
    """The floor's figures: p50 of one saga back to back and paced, the rate two cores could
    sustain on the floor's CPU alone, and that CPU a saga."""
    cpu = results.get("cpu_floor") or {}
    ceiling, per_saga = cpu.get("ceiling_sagas_per_s"), cpu.get("cpu_ms_per_saga")
    paced = results.get("floor_one_saga_paced_ms")
    return {"p50_ms": float(results["floor_one_saga_ms"]),
            "p50_ms_paced": None if paced is None else float(paced),
            "sagas_per_s_ceiling": None if ceiling is None else float(ceiling),
            "cpu_ms_per_saga": None if per_saga is None else float(per_saga)}


async def measure_floor(when: str, quick: bool) -> dict[str, Any]:
    print(f"measuring the floor {when} (raw PostgreSQL step, raw Kafka hop)...", flush=True)
    return {"when": when, "pg": await baselines.pg_step(seconds=3 if quick else 5),
            "hop": await baselines.kafka_hop(200 if quick else 500)}


def with_floor(results: dict[str, Any], measurements: list[dict[str, Any]]) -> None:
    """The floor from the fastest of the measurements, and every open-loop step's p50 as a
    multiple of it."""
    chosen = baselines.fastest(measurements)
    results["baseline_measurements"] = measurements
    results["baseline_pg_step"], results["baseline_kafka_hop"] = chosen["pg"], chosen["hop"]
    floor_ms = baselines.floor_ms(chosen["pg"], chosen["hop"])
    paced_floor_ms = baselines.floor_ms(chosen["pg"], chosen["hop"], paced=True)
    results["floor_one_saga_ms"] = floor_ms
    results["floor_one_saga_paced_ms"] = paced_floor_ms
    results["cpu_floor"] = baselines.cpu_floor(chosen["pg"], chosen["hop"],
                                               results["machine"]["cores"])
    for r in results["open_loop"]:
        r["p50_multiple_of_floor"] = round(r["latency"]["p50_ms"] / floor_ms, 1)
        r["p50_multiple_of_paced_floor"] = round(r["latency"]["p50_ms"] / paced_floor_ms, 1)


PYTHON_PARTS = ("pedidos", "inventario", "pagos", "gateway")


async def profile_hot_service(steps: list[dict[str, Any]], skus: list[str],
                              seconds: float, rate: float | None = None) -> dict[str, Any]:
    """py-spy on the Python service that spent the most CPU per saga at ``rate`` (by default
    the highest), while that rate is offered again; PostgreSQL and Kafka are not Python: their
    share is stated from the CPU figures."""
    hot = goals.hottest(steps, PYTHON_PARTS, rate)
    busiest = goals.step_at(steps, rate)
    if hot is None or busiest is None:
        return {"error": "no open-loop step to choose a component from"}
    rate = busiest["target_rate_per_s"]
    # With replicas, the first instance: each does a share of the same work.
    roots = part_roots().get(hot[0])
    if not roots:
        return {"error": f"{hot[0]} is not running"}
    root = roots[0]
    print(f"profiling {hot[0]} ({hot[1]} ms of CPU per saga at {rate:g}/s) for {seconds:g}s "
          f"at {rate:g} orders/s...", flush=True)
    conn = await asyncpg.connect(admin_dsn())
    try:
        # A stack whose PostgreSQL runs without pg_stat_statements still gets its profile.
        missing = await pg_statements.reset(conn)
        sampling = asyncio.create_task(profile.record(root.pid, seconds))
        window = await load.open_loop(rate, seconds, skus=skus)
        statements = {"error": missing} if missing else await pg_statements.top(
            conn, window["accepted"] - window["unfinished"])
    finally:
        await conn.close()
    try:
        prof = await sampling
    except RuntimeError as exc:
        return {"component": hot[0], "error": str(exc), "postgres_statements": statements}
    return {"component": hot[0], "cpu_ms_per_saga": hot[1], "rate_per_s": rate,
            "seconds": seconds,
            "cpu_ms_per_saga_by_part": busiest.get("cpu_ms_per_saga", {}),
            "load_generator_cpu_ms_per_saga": busiest.get("load_generator_cpu_ms_per_saga"),
            "profile": prof.as_dict(), "postgres_statements": statements}


if __name__ == "__main__":
    subprocess.run([sys.executable, "-m", "local_stack", "up"], check=True,
                   stdout=subprocess.DEVNULL)
    asyncio.run(main())
