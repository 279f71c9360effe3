"""The burst contention scenario: N orders sent at once for a product with fewer units than they
ask for, under each allocation strategy, at several ratios of units to orders; and, in the same
run, each strategy's throughput without contention.

A steady rate hides the race Check-Then-Pay loses: at 50 orders/s each saga ends before the
next is validated. Orders that arrive together are all validated against the same stock, all
charged, and all but the first few lose the allocation and are refunded. A burst is that case.

Each burst gets a product of its own (``units`` = ratio × N, never fewer than one), stocked with
its strategy through ``PUT /products/{sku}``; its orders ask for 1–3 units each, the same
quantities for every strategy of a ratio and round (a seeded draw), all with a card that is
approved, so that every refund is one the strategy caused. Each outcome is read from the
databases afterwards: a refund whose allocation FAILED is one lost to the race; the others
(a cancellation or timeout after the charge) are counted apart, and so are the orders turned
away before any charge (no stock) and the declined payments.

``python -m bench.burst`` runs this scenario alone (the stack started first); ``make bench``
runs it after the closed loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx

from bench import burst_report, load, systems
from bench.common import ROOT, admin_dsn
from bench.http_client import TRANSPORT_ERRORS, HttpStatusError
from saga_harness import identity
from saga_harness import strategies as allocation
from saga_harness.identity import StackAuth

RATIOS = (1.0, 0.5, 0.25, 0.1)
PRICE = "9.99"
# The sku inventario is asked about before anything is measured: does it take strategies?
PROBE_SKU = "BENCH-STRATEGY-PROBE"
# The goal: reserve_then_pay's throughput without contention within 10 % of
# Check-Then-Pay's, measured in the same run.
NO_CONTENTION_SHARE = 0.9
# Without a closed-loop search to take it from: the clients of the no-contention closed loop.
NO_CONTENTION_CLIENTS = 16


@dataclass(frozen=True)
class Settings:
    orders: int
    rounds: int
    strategies: tuple[str, ...]
    ratios: tuple[float, ...] = RATIOS

    @classmethod
    def from_env(cls, quick: bool) -> Settings:
        return cls(orders=int(os.environ.get("BENCH_BURST_ORDERS", "20" if quick else "40")),
                   rounds=int(os.environ.get("BENCH_BURST_ROUNDS", "1" if quick else "2")),
                   strategies=allocation.parse(os.environ.get(
                       "BENCH_STRATEGIES", ",".join(allocation.STRATEGIES)), "BENCH_STRATEGIES"))


async def stock(http: httpx.AsyncClient, sku: str, quantity: int, strategy: str) -> None:
    """The product at the price the orders pay, under ``strategy``; a stack without
    strategies fails the run here, naming the way to measure Check-Then-Pay alone."""
    try:
        await allocation.stock(http, sku, quantity, strategy, price=PRICE)
    except allocation.StrategyRefused as exc:
        raise allocation.StrategyRefused(
            f"{exc}; BENCH_STRATEGIES={allocation.DEFAULT} measures it alone") from exc


async def preflight(strategies: tuple[str, ...]) -> None:
    """Fails before anything is measured if inventario does not take every strategy asked."""
    async with httpx.AsyncClient(auth=StackAuth(), timeout=30) as http:
        for strategy in strategies:
            await stock(http, PROBE_SKU, 0, strategy)


def quantities(orders: int, seed: int) -> list[int]:
    """What each order of a burst asks for: 1–3 units, the same for every strategy."""
    rng = random.Random(seed)
    return [rng.randint(1, 3) for _ in range(orders)]


def units_for(ratio: float, orders: int) -> int:
    return max(1, round(ratio * orders))


async def send_burst(sku: str, asks: list[int]) -> tuple[list[str], int]:
    """Every order at once, each from its own connection: the saga ids accepted, and how many
    were refused or failed."""
    async with load.Pedidos(len(asks)) as http:
        async def place(i: int, qty: int) -> str:
            customer = load.CUSTOMERS[i % len(load.CUSTOMERS)]
            answer = await http.next().post_json(
                "/orders", load.body(sku, qty, customer),
                bearer=identity.customer_token(customer))
            return str(answer["saga_id"])

        placed = await asyncio.gather(*(place(i, q) for i, q in enumerate(asks)),
                                      return_exceptions=True)
    errors = [p for p in placed if isinstance(p, BaseException)]
    for e in errors:
        if not isinstance(e, (HttpStatusError, *TRANSPORT_ERRORS)):
            raise e
    return [p for p in placed if isinstance(p, str)], len(errors)


# How each order of a burst ended, for the tally.
REFUNDED = ("CANCELADA_CON_REEMBOLSO", "REEMBOLSO_FALLIDO")


def tally(rows: list[tuple[str, str | None]]) -> dict[str, int]:
    """(order status, allocation status or None) of each order → counts: completed, refunds
    (all), refunds lost to the race (the allocation FAILED: charged, then no stock), other
    refunds, turned away at validation (no stock), payments declined, anything else."""
    out = dict.fromkeys(("completed", "refunds", "refunds_race_lost", "refunds_other",
                         "no_stock", "declined", "other"), 0)
    for status, allocated in rows:
        if status == "COMPLETADA":
            out["completed"] += 1
        elif status in REFUNDED:
            out["refunds"] += 1
            out["refunds_race_lost" if allocated == "FAILED" else "refunds_other"] += 1
        elif status == "CANCELADA_SIN_STOCK":
            out["no_stock"] += 1
        elif status == "CANCELADA_PAGO_RECHAZADO":
            out["declined"] += 1
        else:
            out["other"] += 1
    return out


async def reservations_table(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval(
        "SELECT to_regclass('inventario.reservations') IS NOT NULL"))


async def observe(conn: asyncpg.Connection, saga_ids: list[str], sku: str) -> dict[str, Any]:
    """A burst's figures from the databases: the outcomes, the span from the first request to
    the last terminal state (the audit trail's times) and the sagas that held a reservation."""
    rows = await conn.fetch(
        "SELECT o.status, a.status AS allocation FROM pedidos.orders o "
        "LEFT JOIN inventario.allocations a ON a.saga_id = o.saga_id::text "
        "WHERE o.saga_id = ANY($1::uuid[])", saga_ids)
    span = await conn.fetchval(
        "WITH s AS (SELECT min(a.at) AS asked, max(a.at) FILTER (WHERE a.to_status = o.status "
        "AND a.from_status IS DISTINCT FROM a.to_status) AS ended FROM pedidos.orders o "
        "JOIN pedidos.saga_audit a ON a.saga_id = o.saga_id "
        "WHERE o.saga_id = ANY($1::uuid[]) GROUP BY o.saga_id) "
        "SELECT extract(epoch FROM max(ended) - min(asked)) FROM s", saga_ids)
    reserved = (await conn.fetchval(
        "SELECT count(DISTINCT saga_id) FROM inventario.reservations "
        "WHERE saga_id = ANY($1::text[])", saga_ids)
        if await reservations_table(conn) else None)
    left = await conn.fetchval("SELECT quantity FROM inventario.products WHERE sku = $1", sku)
    return {"counts": tally([(r["status"], r["allocation"]) for r in rows]),
            "span_s": float(span or 0.0), "reserved_sagas": reserved, "units_left": left}


async def one_burst(http: httpx.AsyncClient, strategy: str, ratio: float, asks: list[int],
                    run_id: str, *, timeout_s: float = 180.0, from_quiet: bool = True
                    ) -> dict[str, Any]:
    """One burst for a new product: ``from_quiet``, once the stack is quiet (load.settle)."""
    units = units_for(ratio, len(asks))
    sku = f"BENCH-BURST-{run_id}-{strategy}-{ratio:g}-{uuid.uuid4().hex[:4]}"
    await stock(http, sku, units, strategy)
    if from_quiet:
        await load.settle()
    saga_ids, refused = await send_burst(sku, asks)
    conn = await asyncpg.connect(admin_dsn())
    try:
        unfinished = await load.wait_terminal(conn, saga_ids, timeout_s)
        seen = await observe(conn, saga_ids, sku)
    finally:
        await conn.close()
    completed = seen["counts"]["completed"]
    return {"strategy": strategy, "ratio": ratio, "units": units, "orders": len(asks),
            "units_asked": sum(asks), "accepted": len(saga_ids), "http_errors": refused,
            "unfinished": unfinished, "saga_ids": saga_ids, **seen,
            "completed_per_s": round(completed / seen["span_s"], 1) if seen["span_s"] else None}


def cell(strategy: str, ratio: float, bursts: list[dict[str, Any]], latency: dict[str, Any]
         ) -> dict[str, Any]:
    """One strategy at one ratio over its rounds: counts summed, each per 100 orders sent,
    completed orders a second (the median of its bursts) and the latency of all its sagas."""
    orders = sum(b["orders"] for b in bursts)
    counts: dict[str, int] = {}
    for b in bursts:
        for k, v in b["counts"].items():
            counts[k] = counts.get(k, 0) + v
    rates = [b["completed_per_s"] for b in bursts if b["completed_per_s"] is not None]
    reserved = [b["reserved_sagas"] for b in bursts if b["reserved_sagas"] is not None]
    return {"strategy": strategy, "ratio": ratio, "orders": orders,
            "units": sum(b["units"] for b in bursts), "counts": counts,
            "per_100_orders": {k: round(100 * v / orders, 1) if orders else None
                               for k, v in counts.items()},
            "completed_per_s": statistics.median(rates) if rates else None,
            "p99_ms": latency["p99_ms"], "latency": latency,
            "reserved_sagas": sum(reserved) if reserved else None,
            "http_errors": sum(b["http_errors"] for b in bursts),
            "unfinished": sum(b["unfinished"] for b in bursts),
            "bursts": [{k: v for k, v in b.items() if k != "saga_ids"} for b in bursts]}


async def contention(settings: Settings, run_id: str) -> list[dict[str, Any]]:
    """Every ratio, each strategy's bursts in turn (the order reversed every other round, so
    that drift within the run falls on every strategy alike)."""
    cells = []
    async with httpx.AsyncClient(auth=StackAuth(), timeout=30) as http:
        for ratio in settings.ratios:
            bursts: dict[str, list[dict[str, Any]]] = {s: [] for s in settings.strategies}
            for n in range(settings.rounds):
                asks = quantities(settings.orders, seed=round(1000 * ratio) + 7919 * n)
                order = settings.strategies if n % 2 == 0 else settings.strategies[::-1]
                for strategy in order:
                    print(f"burst: {settings.orders} orders at once for "
                          f"{units_for(ratio, settings.orders)} units, {strategy}...",
                          flush=True)
                    bursts[strategy].append(await one_burst(http, strategy, ratio, asks,
                                                            run_id))
            conn = await asyncpg.connect(admin_dsn())
            try:
                for strategy, done in bursts.items():
                    ids = [i for b in done for i in b["saga_ids"]]
                    measured = await systems.this_stack().latencies(conn, ids)
                    cells.append(cell(strategy, ratio, done, measured["latency"]))
            finally:
                await conn.close()
    return cells


async def without_contention(settings: Settings, run_id: str, clients: int, seconds: float,
                             products: int) -> dict[str, Any]:
    """Each strategy's throughput with stock to spare: the closed loop at ``clients`` over
    ``products`` products of that strategy, in alternating blocks (every strategy, then
    reversed, ``settings.rounds`` times); a strategy's figure is the median of its blocks."""
    skus: dict[str, list[str]] = {}
    async with httpx.AsyncClient(auth=StackAuth(), timeout=30) as http:
        for strategy in settings.strategies:
            skus[strategy] = [f"BENCH-NC-{run_id}-{strategy}-{i:03d}" for i in range(products)]
            for sku in skus[strategy]:
                await stock(http, sku, 10_000_000, strategy)
    blocks: dict[str, list[dict[str, Any]]] = {s: [] for s in settings.strategies}
    for n in range(settings.rounds):
        for strategy in settings.strategies if n % 2 == 0 else settings.strategies[::-1]:
            await load.settle()
            print(f"without contention: {strategy}, closed loop with {clients} clients...",
                  flush=True)
            step = await load.closed_loop(clients, seconds, skus[strategy])
            blocks[strategy].append({"sagas_per_s": step["sagas_per_s"],
                                     "p99_ms": step["latency"]["p99_ms"],
                                     "cpu_ms_per_saga": step["cpu_ms_per_saga_total"],
                                     "outcomes": step["outcomes"]})
    by_strategy = {s: {"sagas_per_s": statistics.median(b["sagas_per_s"] for b in bl),
                       "p99_ms": statistics.median(b["p99_ms"] for b in bl),
                       "cpu_ms_per_saga": statistics.median(b["cpu_ms_per_saga"] for b in bl),
                       "blocks": bl} for s, bl in blocks.items()}
    return {"clients": clients, "seconds": seconds, "products": products,
            "by_strategy": by_strategy, **share_of_check_then_pay(by_strategy)}


def share_of_check_then_pay(by_strategy: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each other strategy's throughput as a share of Check-Then-Pay's, and whether
    reserve_then_pay's is within the goal."""
    base = (by_strategy.get(allocation.DEFAULT) or {}).get("sagas_per_s")
    shares = {s: round(m["sagas_per_s"] / base, 3) for s, m in by_strategy.items()
              if s != allocation.DEFAULT and base}
    reserve = shares.get("reserve_then_pay")
    return {"share_of_check_then_pay": shares, "goal_share": NO_CONTENTION_SHARE,
            "reserve_within_goal": None if reserve is None else reserve >= NO_CONTENTION_SHARE}


async def scenario(settings: Settings, *, clients: int, seconds: float, products: int
                   ) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    cells = await contention(settings, run_id)
    return {"orders_per_burst": settings.orders, "rounds": settings.rounds,
            "strategies": list(settings.strategies), "ratios": list(settings.ratios),
            "cells": cells,
            "no_contention": await without_contention(settings, run_id, clients, seconds,
                                                      products)}


async def main() -> None:
    quick = os.environ.get("BENCH_QUICK") == "1"
    settings = Settings.from_env(quick)
    await preflight(settings.strategies)
    load.authenticate()
    results = {"burst": await scenario(
        settings, clients=NO_CONTENTION_CLIENTS, seconds=4 if quick else 10,
        products=int(os.environ.get("BENCH_PRODUCTS", "50")))}
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = out / f"burst-{stamp}.json"
    path.write_text(json.dumps(results, indent=2))
    burst_report.plot(results, out / f"burst-{stamp}.png")
    burst_report.report(results)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    subprocess.run([sys.executable, "-m", "local_stack", "up"], check=True,
                   stdout=subprocess.DEVNULL)
    asyncio.run(main())
