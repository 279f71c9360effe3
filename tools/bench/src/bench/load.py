"""Drives the real stack through POST /orders and measures every saga from its audit trail."""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from typing import Any

import asyncpg
import httpx

from bench import upkeep
from bench.common import admin_dsn, config, cpu_between, sample_cpu
from bench.http_client import TRANSPORT_ERRORS, HttpStatusError, JsonClient
from bench.latencies import hop_latencies
from bench.systems import System, this_stack
from saga_harness import identity

# The customers the load is spread over, each placing its orders with its own token (from the
# stack's identity provider, fetched once: ``authenticate``), as a real client would; a token
# per order would measure the identity provider, not the services. Each pays with a card of its
# own, and they are many: pedidos caps the orders one customer, or one card, may have waiting
# for their payment (PEDIDOS_WAITING_ORDERS_PER_CUSTOMER, _PER_CARD: 5 and 3), so the load is
# spread in turn over enough customers that even the closed loop's 512 clients, or a saturated
# open loop's backlog, leave each a few orders waiting at most: the benchmark measures the
# stack as a shop's many customers load it, refusing none.
CUSTOMERS = [f"bench-{i:03d}" for i in range(256)]


def authenticate() -> None:
    """Fetches every customer's token before anything is measured."""
    for customer in CUSTOMERS:
        identity.customer_token(customer)


def body(sku: str, qty: int = 1, customer: str = CUSTOMERS[0]) -> dict[str, Any]:
    return {"customer_id": customer,
            "items": [{"sku": sku, "quantity": qty, "price": "9.99"}], "currency": "USD",
            "shipping_address": {"street": "s", "city": "c", "country": "PE",
                                 "postal_code": "1"},
            # The customer's own card: the fake gateway approves any tok_… but its test cards.
            "payment_method": {"type": "credit_card", "token": f"tok_visa_{customer}"}}


async def set_stock(http: httpx.AsyncClient, sku: str, qty: int) -> None:
    # At the catalog price ``body`` orders at: an order at another price would be refused.
    (await http.put(f"{config.INVENTARIO}/products/{sku}",
                    json={"quantity": qty, "price": "9.99", "currency": "USD"})
     ).raise_for_status()


async def _backlog(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(
        "SELECT (SELECT count(*) FROM pedidos.outbox WHERE status = 'pending') + "
        "(SELECT count(*) FROM inventario.outbox WHERE status = 'pending') + "
        "(SELECT count(*) FROM pagos.outbox WHERE status = 'pending')"))


async def stack_state() -> dict[str, int]:
    """How much the stack's database holds: the catalogue a step's statements search, and the
    rows the inbox, outbox and audit indexes take new entries among (kept for days)."""
    conn = await asyncpg.connect(admin_dsn())
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM inventario.products) AS catalogue_products, "
            # The planner's estimate, read from the catalogue (a count would scan days of
            # sagas); a table never vacuumed nor analysed has none yet (-1): then counted.
            "(SELECT CASE WHEN reltuples >= 0 THEN reltuples::bigint "
            "ELSE (SELECT count(*) FROM pedidos.sagas) END "
            "FROM pg_class WHERE oid = 'pedidos.sagas'::regclass) AS sagas_kept, "
            "pg_database_size(current_database()) / 1048576 AS database_mb")
        return {k: int(v) for k, v in row.items()}
    finally:
        await conn.close()


async def wait_terminal(conn: asyncpg.Connection, saga_ids: list[str], timeout: float,
                        system: System | None = None) -> int:
    """Waits until every saga reached a terminal state; returns how many had not by then.

    Each look asks only about the sagas still running at the one before: this query runs on
    the measured stack's two cores, inside the CPU window, and asking each time about every
    saga of the step (4,000 index probes at 200/s for 20 s, five times a second while the
    backlog drains) took up to a tenth of a core from PostgreSQL."""
    system = system or this_stack()
    deadline = time.monotonic() + timeout
    running = list(saga_ids)
    while running and time.monotonic() < deadline:
        ended = {r[0] for r in await system.ended(conn, running)}
        running = [saga for saga in running if saga not in ended]
        if running:
            await asyncio.sleep(0.2)
    return len(running)


class Pedidos:
    """The load generator's HTTP clients, one to each front door of the system measured (each
    pedidos instance with SAGA_REPLICAS: a stack of two is measured with its orders spread over
    both, as a load balancer would), taken in turn (``bench/http_client.py``: it shares the
    two cores with the stack it measures, so it takes as little of them as it can)."""

    def __init__(self, connections: int, system: System | None = None) -> None:
        self.clients = [JsonClient(url, connections=connections, timeout_s=30)
                        for url in (system or this_stack()).urls]
        self._turn = itertools.cycle(self.clients)

    def next(self) -> JsonClient:
        return next(self._turn)

    async def __aenter__(self) -> Pedidos:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in self.clients:
            await client.close()


def _client(connections: int, system: System) -> Pedidos:
    return Pedidos(connections, system)


async def _database_position(conn: asyncpg.Connection) -> tuple[int, str]:
    """The next transaction id to be assigned and the WAL's insert position: what the
    database has written since, counted between two readings. A transaction that only reads
    takes no id, so the load generator's own queries do not count as commits."""
    row = await conn.fetchrow("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint "
                              "AS xid, pg_current_wal_insert_lsn()::text AS lsn")
    return int(row["xid"]), str(row["lsn"])


async def _wal_bytes(conn: asyncpg.Connection, after: str, before: str) -> int:
    return int(await conn.fetchval("SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::bigint",
                                   after, before))


async def _written_per_saga(conn: asyncpg.Connection, before: tuple[int, str], sagas: int
                            ) -> dict[str, float | None]:
    after = await _database_position(conn)
    wal = await _wal_bytes(conn, after[1], before[1])
    if not sagas:
        return {"commits_per_saga": None, "wal_bytes_per_saga": None}
    return {"commits_per_saga": round((after[0] - before[0]) / sagas, 1),
            "wal_bytes_per_saga": round(wal / sagas)}


def _own_parts(resources: dict[str, Any], system: System) -> dict[str, Any]:
    return {part: r for part, r in resources.items() if part in system.parts}


async def _place(http: Pedidos, sku: str, n: int, qty: int = 1) -> str:
    """POST /orders to the next pedidos instance, as the ``n``-th customer of ``CUSTOMERS`` (in
    turn); the new saga's id."""
    customer = CUSTOMERS[n % len(CUSTOMERS)]
    return str((await http.next().post_json("/orders", body(sku, qty, customer),
                                            bearer=identity.customer_token(customer)))["saga_id"])


async def open_loop(rate: float, seconds: float, *, skus: list[str], qty: int = 1,
                    timeout: float = 120, system: System | None = None) -> dict[str, Any]:
    system = system or this_stack()
    conn = await asyncpg.connect(admin_dsn())
    async with _client(200, system) as http:
        saga_ids: list[str] = []
        errors = 0
        error_kinds: collections.Counter[str] = collections.Counter()
        peak_backlog = 0
        stop_sampling = asyncio.Event()

        async def sampler() -> None:
            nonlocal peak_backlog
            sconn = await asyncpg.connect(admin_dsn())
            while not stop_sampling.is_set() and not system.is_peer:
                peak_backlog = max(peak_backlog, await _backlog(sconn))
                await asyncio.sleep(0.1)
            await sconn.close()

        async def post(i: int) -> None:
            nonlocal errors
            try:
                saga_ids.append(await _place(http, skus[i % len(skus)], i, qty))
            except HttpStatusError as exc:
                errors += 1
                error_kinds[str(exc.status)] += 1
            except TRANSPORT_ERRORS as exc:
                errors += 1
                error_kinds[type(exc).__name__] += 1

        sampling = asyncio.create_task(sampler())
        written0 = await _database_position(conn)
        cpu0 = sample_cpu()
        own_cpu0 = time.process_time()
        t0 = time.perf_counter()
        tasks = []
        n = int(rate * seconds)
        for i in range(n):
            await asyncio.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
            tasks.append(asyncio.create_task(post(i)))
        await asyncio.gather(*tasks)
        left = await wait_terminal(conn, saga_ids, timeout, system)
        elapsed = time.perf_counter() - t0
        cpu1 = sample_cpu()
        written = await _written_per_saga(conn, written0, len(saga_ids) - left)
        own_cpu = time.process_time() - own_cpu0
        stop_sampling.set()
        await sampling
    result = {
        "target_rate_per_s": rate, "duration_s": seconds, "orders": n, "accepted": len(saga_ids),
        "http_errors": errors, "http_error_kinds": dict(error_kinds), "unfinished": left,
        "sustained_sagas_per_s": round((len(saga_ids) - left) / elapsed, 1),
        **await system.latencies(conn, saga_ids),
        "peak_outbox_backlog": peak_backlog,
        **({} if system.is_peer else {"hops": await hop_latencies(conn, saga_ids)}),
        "resources": _own_parts(cpu_between(cpu0, cpu1, elapsed), system),
        **written,
    }
    done = len(saga_ids) - left
    # What each part spent per saga that completed (a saturated step's ceiling is set by it).
    result["cpu_ms_per_saga"] = {
        part: round(10 * r["cpu_pct_of_core"] * elapsed / done, 2)
        for part, r in result["resources"].items()} if done else {}
    # Not part of the stack, but on the same two cores: what measuring it takes from them.
    result["load_generator_cpu_ms_per_saga"] = round(1000 * own_cpu / done, 2) if done else None
    await conn.close()
    return result


class TerminalWatch:
    """Tells clients when their saga reached a terminal state, with one query for all of them
    every few milliseconds: polling GET /orders per client would load pedidos far more than
    the sagas themselves do.

    Its interval only delays a client's next order, never the latency measured (that comes
    from the audit trail), yet every query costs the same two cores the stack runs on: at 64
    clients, 200 queries a second were a third of the load generator's CPU. So the interval
    follows the sagas' own duration — a fiftieth of the latency it has seen, between
    ``min_interval_s`` and ``max_interval_s`` — which keeps what it adds to a client's cycle
    near 1 %."""

    def __init__(self, min_interval_s: float = 0.005, max_interval_s: float = 0.025,
                 system: System | None = None) -> None:
        self.system = system or this_stack()
        self.min_interval_s, self.max_interval_s = min_interval_s, max_interval_s
        self.interval_s = min_interval_s
        self._latency_s: float | None = None
        self._waiting: dict[str, tuple[asyncio.Future[str], float]] = {}

    def wait(self, saga_id: str) -> asyncio.Future[str]:
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[saga_id] = (fut, time.perf_counter())
        return fut

    def _seen(self, latency_s: float) -> None:
        self._latency_s = latency_s if self._latency_s is None else (
            0.9 * self._latency_s + 0.1 * latency_s)
        self.interval_s = min(self.max_interval_s, max(self.min_interval_s,
                                                       self._latency_s / 50))

    async def run(self, stop: asyncio.Event) -> None:
        conn = await asyncpg.connect(admin_dsn())
        try:
            while not stop.is_set():
                if self._waiting:
                    rows = await self.system.ended(conn, list(self._waiting))
                    now = time.perf_counter()
                    for r in rows:
                        fut, since = self._waiting.pop(r[0], (None, now))
                        if fut is not None and not fut.done():
                            self._seen(now - since)
                            fut.set_result(r[1])
                await asyncio.sleep(self.interval_s)
        finally:
            await conn.close()


def steady_window(finished: list[tuple[float, float, str]], measure_from: float,
                  stop_at: float) -> tuple[list[str], int]:
    """Of the sagas a closed loop ran, as (placed, ended, saga id): the ids of those placed
    within [measure_from, stop_at) — whose latency is measured — and how many ended within
    it — the throughput's count."""
    placed = [saga for at, _, saga in finished if measure_from <= at < stop_at]
    ended = sum(1 for _, at, _ in finished if measure_from <= at <= stop_at)
    return placed, ended


async def closed_loop(concurrency: int, seconds: float, skus: list[str],
                      ramp_s: float = 2.0, system: System | None = None) -> dict[str, Any]:
    """Each client places an order and waits for its terminal state before the next. Latency
    is request → terminal state from the audit trail, as in the open loop.

    The clients start together, so their first orders reach the stack as one burst, which a
    stack in steady state under this many clients never sees again: with 96 clients that
    burst alone put p99 near the 1 s line. The first ``ramp_s`` are therefore not
    measured: throughput is the sagas that ended within the ``seconds`` after it, latency that
    of the sagas placed within them. The CPU of the system's parts over that window, per saga
    that ended in it, is what a saga costs it saturated (at the concurrency that gives its
    highest throughput); so are the database's commits and WAL."""
    system = system or this_stack()
    finished: list[tuple[float, float, str]] = []  # (placed, ended, saga id)
    measure_from = time.perf_counter() + ramp_s
    stop_at = measure_from + seconds
    watch, stop = TerminalWatch(system=system), asyncio.Event()
    watching = asyncio.create_task(watch.run(stop))
    window: dict[str, Any] = {}

    async def observe() -> None:
        """CPU and the database's writes over [measure_from, stop_at)."""
        conn = await asyncpg.connect(admin_dsn())
        try:
            await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
            window["written0"] = await _database_position(conn)
            window["cpu0"], window["t0"] = sample_cpu(), time.perf_counter()
            await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
            window["cpu1"], window["t1"] = sample_cpu(), time.perf_counter()
            window["written1"] = await _database_position(conn)
            window["wal"] = await _wal_bytes(conn, window["written1"][1],
                                             window["written0"][1])
        finally:
            await conn.close()

    observing = asyncio.create_task(observe())
    async with _client(concurrency * 2 + 10, system) as http:
        async def client(n: int) -> None:
            i = n
            while (placed := time.perf_counter()) < stop_at:
                # Each client a customer of its own (two with 512 clients).
                saga_id = await _place(http, skus[i % len(skus)], n)
                i += concurrency
                await asyncio.wait_for(watch.wait(saga_id), 60)
                finished.append((placed, time.perf_counter(), saga_id))

        try:
            await asyncio.gather(*(client(n) for n in range(concurrency)))
        finally:
            stop.set()
            await watching
            await observing
    placed_in_window, ended_in_window = steady_window(finished, measure_from, stop_at)
    conn = await asyncpg.connect(admin_dsn())
    try:
        measured = await system.latencies(conn, placed_in_window)
    finally:
        await conn.close()
    took = window["t1"] - window["t0"]
    resources = _own_parts(cpu_between(window["cpu0"], window["cpu1"], took), system)
    per_saga = max(ended_in_window, 1)
    by_part = {part: round(10 * r["cpu_pct_of_core"] * took / per_saga, 2)
               for part, r in resources.items()}
    return {"concurrency": concurrency, "sagas_per_s": round(ended_in_window / seconds, 1),
            "ramp_s": ramp_s, "measured_sagas": len(placed_in_window),
            "latency": measured["latency"], "outcomes": measured["outcomes"],
            "cpu_ms_per_saga": by_part,
            "cpu_ms_per_saga_total": round(sum(by_part.values()), 2),
            "commits_per_saga": round((window["written1"][0] - window["written0"][0])
                                      / per_saga, 1),
            "wal_bytes_per_saga": round(window["wal"] / per_saga)}


async def idle_cpu(seconds: float = 10.0) -> dict[str, Any]:
    a = sample_cpu()
    await asyncio.sleep(seconds)
    b = sample_cpu()
    per_part = cpu_between(a, b, seconds)
    return {"seconds": seconds, "total_pct_of_core": round(sum(
        v["cpu_pct_of_core"] for v in per_part.values()), 1), "parts": per_part}


async def database_maintenance_done(timeout_s: float = 300.0) -> dict[str, Any]:
    """The load's own upkeep (vacuuming the rows it updated, analysing what it changed,
    writing out the pages it dirtied) is not what an idle stack costs: autovacuum of the
    outbox ran for about a minute after the load on a long-lived cluster (PostgreSQL 6.3 % of a
    core instead of 0.4), and on a fresh one its workers started 39 s after the load, inside
    the idle window (``bench/upkeep.py``). Done here, before the window."""
    started = time.perf_counter()
    # Until the services' idle backends have sent their statistics, the load's changes may not
    # show in them.
    await asyncio.sleep(upkeep.STATISTICS_SETTLE_S)
    conn = await asyncpg.connect(admin_dsn())
    try:
        vacuumed = await upkeep.do_upkeep(conn, timeout_s)
    finally:
        await conn.close()
    return {"waited_for_database_upkeep_s": round(time.perf_counter() - started, 1),
            "tables_vacuumed": vacuumed}


async def settle(limit_pct: float = 10.0, window_s: float = 2.0, timeout_s: float = 60.0
                 ) -> float:
    """Waits until every part of the stack uses less than ``limit_pct`` of a core over a
    window (at most ``timeout_s``); returns how long that took. Each scenario starts from a
    quiet stack rather than from what the one before left (a backlog still draining, a
    checkpoint, Kafka's JIT)."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        usage = await idle_cpu(window_s)
        if all(v["cpu_pct_of_core"] < limit_pct for v in usage["parts"].values()):
            break
    return round(time.perf_counter() - started, 1)
