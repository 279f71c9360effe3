"""A chaos scenario: orders at a steady rate with contention, a fault schedule, healing,
quiescence, then the invariant check and, for the faults that hang or cut off an instance, the
time the sagas took to recover (``chaos.recovery``). Schedules are random but seeded
(reproducible) or scripted; every fault is undone before the check."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import signal
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from chaos import recovery, snapshot, targets
from chaos.checker import TERMINAL, Snapshot, Violation, check, no_manual_refund
from chaos.recovery import Recovery, Window
from netproxy.layout import CONTROL_PORT, stack_routes
from saga_harness import config, replicas, stack
from saga_harness import strategies as allocation
from saga_harness.identity import StackAuth

SERVICES = ["pedidos", "inventario", "pagos"]
PARTS = [*SERVICES, "gateway", "kafka", "postgres"]
# Network faults go through the TCP proxy of tools/netproxy (the stack started with
# SAGA_NETPROXY=1). The random schedules draw from the first three; "html" and "garbage" answer
# a share of the HTTP calls on a route in the target's place (netproxy.replies).
RANDOM_NETWORK_KINDS = ["latency", "blackhole", "reset"]
NETWORK_KINDS = [*RANDOM_NETWORK_KINDS, "html", "garbage"]
ROUTES = sorted(stack_routes(0, 0))
CONTROL = f"http://127.0.0.1:{CONTROL_PORT}"
CLEAR = {"latency_s": 0, "blackhole": False, "refuse": False, "html_share": 0,
         "garbage_share": 0}


@dataclass(frozen=True)
class Fault:
    at_s: float          # after the start of the load
    kind: str            # kill | pause | latency | blackhole | reset | html | garbage
    part: str            # a part of the stack (parts killed together: "kafka-2+kafka-3"),
    #                      or a proxy route for network faults; either may name an instance by
    #                      its relay's role when it strikes ("pedidos@leader": chaos.targets)
    duration_s: float    # down, paused or degraded for this long
    latency_s: float = 0.0
    share: float = 0.0   # html, garbage: the share of the route's calls answered so

    def __str__(self) -> str:
        extra = (f" +{self.latency_s:g}s" if self.kind == "latency" else
                 f" {self.share:.0%}" if self.kind in ("html", "garbage") else "")
        return f"{self.kind}{extra} {self.part} at {self.at_s:.1f}s for {self.duration_s:.1f}s"


def random_schedule(seed: int, load_s: float, faults: int = 3, network: int = 0) -> list[Fault]:
    """``faults`` kills and pauses of at least two different parts, plus ``network`` faults on
    proxy routes; each fault over before the load ends."""
    rng = random.Random(seed)
    while True:
        chosen = [Fault(round(rng.uniform(1.0, load_s - 4.0), 1), rng.choice(["kill", "pause"]),
                        rng.choice(PARTS), round(rng.uniform(1.0, 3.0), 1))
                  for _ in range(faults)]
        if len({f.part for f in chosen}) >= 2:
            break
    for _ in range(network):
        kind = rng.choice(RANDOM_NETWORK_KINDS)
        chosen.append(Fault(round(rng.uniform(1.0, load_s - 4.0), 1), kind, rng.choice(ROUTES),
                            round(rng.uniform(1.0, 4.0), 1),
                            round(rng.uniform(0.2, 3.0), 1) if kind == "latency" else 0.0))
    return sorted(chosen, key=lambda f: f.at_s)


# Violations of one invariant listed in a report before the rest are counted.
SHOWN_PER_INVARIANT = 5


@dataclass
class Report:
    name: str
    faults: list[Fault]
    orders_sent: int = 0
    acknowledged: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    cancels: dict[int, int] = field(default_factory=dict)
    """Answers to the cancellations sent, by HTTP status."""
    violations: list[Violation] = field(default_factory=list)
    seconds: float = 0.0
    recoveries: list[Recovery] = field(default_factory=list)
    garbled_calls: int = 0
    """Gateway calls of the run the TCP proxy answered in the gateway's place."""
    survivors: bool = False
    """More than one instance of every service: the bound applies while a fault lasts."""
    strategies: dict[str, str] = field(default_factory=dict)
    """The run's products' allocation strategies, by sku."""
    reservations: str = ""
    """Whether the reservation invariants were checked, and on how many reservations."""

    def render(self) -> str:
        lines = [f"scenario {self.name} ({self.seconds:.0f}s)",
                 "  faults: " + ("; ".join(str(f) for f in self.faults) or "none"),
                 f"  orders: {self.orders_sent} sent, {len(self.acknowledged)} acknowledged, "
                 f"{sum(self.outcomes.values())} in the database",
                 f"  outcomes: {self.outcomes}",
                 *([f"  strategies: {_by_strategy(self.strategies)}; {self.reservations}"]
                   if self.strategies else []),
                 *([f"  cancellations answered: {self.cancels}"] if self.cancels else []),
                 *([f"  gateway calls answered by the proxy: {self.garbled_calls}"]
                   if self.garbled_calls else []),
                 *(f"  recovery: {r.render()}; time to recover "
                   f"{recovery.time_to_recover(r, self.survivors):.1f}s (bound "
                   f"{recovery.BOUND_S:g}s {'while it lasts' if self.survivors else 'after it'})"
                   for r in self.recoveries),
                 "  invariants: " + ("all hold" if not self.violations else
                                     f"{len(self.violations)} VIOLATED")]
        shown: dict[str, int] = {}
        for v in self.violations:  # a few of each kind: hundreds of one say no more
            shown[v.invariant] = shown.get(v.invariant, 0) + 1
            if shown[v.invariant] <= SHOWN_PER_INVARIANT:
                lines.append(f"    - {v}")
        lines += [f"    - … and {n - SHOWN_PER_INVARIANT} more of {name}"
                  for name, n in shown.items() if n > SHOWN_PER_INVARIANT]
        return "\n".join(lines)


def _by_strategy(strategies: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for strategy in strategies.values():
        counts[strategy] = counts.get(strategy, 0) + 1
    return ", ".join(f"{n} product(s) {strategy}" for strategy, n in counts.items())


def reservations_checked(snap: Snapshot) -> str:
    held = snap.reservations
    if not held.checked:
        return "reservation invariants hold vacuously (no inventario.reservations table)"
    return f"reservation invariants checked on {len(held.rows)} reservation(s)"


def _now() -> datetime:
    return datetime.now(UTC)


async def _inject(fault: Fault) -> Window:
    """Strikes, waits ``duration_s``, undoes; what it struck and when."""
    async with httpx.AsyncClient(timeout=5) as http:
        if fault.kind in NETWORK_KINDS:
            return await _network_fault(fault, http)
        parts = [await targets.instance(p, http) for p in fault.part.split("+")]
    target = "+".join(parts)
    if fault.kind == "pause":
        if not _signal(target, signal.SIGSTOP):
            # Killed by an earlier fault and not back yet: nothing to pause.
            return Window(str(fault), f"{target} (not running)", _now(), _now())
        started = _now()
        await asyncio.sleep(fault.duration_s)
        _signal(target, signal.SIGCONT)
        return Window(str(fault), target, started, _now())
    for part in parts:
        await asyncio.to_thread(stack.stack, "kill", part)
    started = _now()
    await asyncio.sleep(fault.duration_s)
    # Other faults may be in force: start it and let it find its way back on its own.
    # One after the other: starting a broker starts every broker that is down, and two
    # starts at once would each stop the broker the other one is starting.
    for part in parts:
        await asyncio.to_thread(stack.stack, "start", part, "--no-wait", check=False)
    return Window(str(fault), target, started, _now())


def _signal(part: str, sig: signal.Signals) -> bool:
    try:
        if part == "postgres":
            # The postmaster and every backend: the whole server freezes, as in a VM pause.
            for pid in _postgres_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        else:
            stack.signal_part(part, sig)
        return True
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return False


def _postgres_pids() -> list[int]:
    data_dir = stack.stack("pg-data-dir").stdout.strip()
    postmaster = int((Path(data_dir) / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    pids.append(int(proc.name))
    return pids


async def _network_fault(fault: Fault, http: httpx.AsyncClient) -> Window:
    known = {r["name"] for r in (await http.get(f"{CONTROL}/routes")).json()}
    routes = await targets.routes(fault.part, http, known)
    change = {"latency": {"latency_s": fault.latency_s}, "blackhole": {"blackhole": True},
              "html": {"html_share": fault.share}, "garbage": {"garbage_share": fault.share},
              "reset": {"refuse": True}}[fault.kind]
    for name in routes:
        (await http.put(f"{CONTROL}/routes/{name}", json=change)).raise_for_status()
        if fault.kind == "reset":  # reset what is open, refuse what comes, for the duration
            (await http.post(f"{CONTROL}/routes/{name}/reset")).raise_for_status()
    started = _now()
    await asyncio.sleep(fault.duration_s)
    for name in routes:
        (await http.put(f"{CONTROL}/routes/{name}", json=CLEAR)).raise_for_status()
    return Window(str(fault), "+".join(routes), started, _now())


async def clear_network_faults() -> None:
    with contextlib.suppress(httpx.HTTPError):
        async with httpx.AsyncClient(timeout=5) as http:
            await http.delete(f"{CONTROL}/faults")


# A few customers, each with its token from the stack's identity provider (fetched once).
CUSTOMERS = 8


def _body(sku: str, qty: int, token: str, customer: str) -> dict[str, Any]:
    return {"customer_id": customer,
            "items": [{"sku": sku, "quantity": qty, "price": "2.50"}], "currency": "USD",
            "shipping_address": {"street": "s", "city": "c", "country": "PE", "postal_code": "1"},
            "payment_method": {"type": "credit_card", "token": token}}


def run_strategies() -> tuple[str, ...]:
    """The allocation strategies the run's products take in turn: ``CHAOS_STRATEGIES``, by
    default every one (Check-Then-Pay, reserve_then_pay and auto)."""
    return allocation.parse(os.environ.get("CHAOS_STRATEGIES", ",".join(allocation.STRATEGIES)),
                            "CHAOS_STRATEGIES")


@dataclass
class OrderLoad:
    """Orders with contention (a few products of limited stock, one or two units each; a tenth
    declined, a tenth charged after a transient gateway failure), sent round-robin to every
    pedidos instance. An instance that does not answer (killed, restarting) has the order sent
    to the next one with the same Idempotency-Key, as a load balancer retries: the order is
    placed once whichever instance took it. ``cancel_share`` of the orders are cancelled
    through the API a random 0–150 ms after they were accepted: cancellations racing every
    step of the saga."""

    http: httpx.AsyncClient
    initial: dict[str, int]
    rng: random.Random
    pedidos: list[str]
    cancel_share: float = 0.0
    strategies: dict[str, str] = field(default_factory=dict)
    """Each product's allocation strategy (``CHAOS_STRATEGIES``, in turn)."""
    acknowledged: list[str] = field(default_factory=list)
    """Order ids answered 202, in the order of the answers."""
    sent: int = 0
    cancels: dict[int, int] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)
    _placing: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    async def stocked(cls, http: httpx.AsyncClient, *, seed: int = 0, skus: int = 3,
                      units: int = 12, cancel_share: float = 0.0,
                      pedidos: list[str] | None = None) -> OrderLoad:
        """New products with ``units`` each, priced as the orders are, each under the next
        allocation strategy of ``CHAOS_STRATEGIES`` in turn (``http`` authenticates as the
        stack's users: ``saga_harness.identity.StackAuth``)."""
        initial = {f"CHAOS-{uuid.uuid4().hex[:8]}": units for _ in range(skus)}
        chosen = itertools.cycle(run_strategies())
        strategies = {sku: next(chosen) for sku in initial}
        for sku, qty in initial.items():
            await allocation.stock(http, sku, qty, strategies[sku], price="2.50")
        return cls(http, initial, random.Random(seed),
                   pedidos or replicas.instance_urls("pedidos"), cancel_share, strategies)

    async def _post(self, i: int, body: dict[str, Any]) -> httpx.Response | None:
        """POST /orders from instance ``i mod n`` on, one try per instance; None when none
        answered."""
        key = {"Idempotency-Key": f"chaos-{uuid.uuid4().hex}"}
        for k in range(len(self.pedidos)):
            base = self.pedidos[(i + k) % len(self.pedidos)]
            try:
                return await self.http.post(f"{base}/orders", json=body, headers=key)
            except httpx.HTTPError:
                continue  # not acknowledged there: the next instance, with the same key
        return None

    async def place(self, i: int) -> None:
        token = ("tok_chargeDeclined" if i % 10 == 9 else
                 "tok_transient1" if i % 10 == 4 else "tok_visa")
        body = _body(self.rng.choice(list(self.initial)), self.rng.randint(1, 2), token,
                     f"chaos-{i % CUSTOMERS}")
        cancel_after = (self.rng.uniform(0, 0.150) if self.rng.random() < self.cancel_share
                        else None)
        r = await self._post(i, body)
        if r is None:
            return  # not acknowledged: the client would retry; nothing was promised
        if r.status_code == 500:
            self.server_errors.append(f"POST /orders: {r.text[:200]}")
        if r.status_code != 202:
            return
        self.acknowledged.append(r.json()["order_id"])
        if cancel_after is None:
            return
        # The workload's timing: the cancellation lands wherever the saga is then.
        await asyncio.sleep(cancel_after)
        base = self.pedidos[i % len(self.pedidos)]
        try:
            c = await self.http.post(f"{base}/sagas/{r.json()['saga_id']}/cancel",
                                      json={"reason": "chaos: cancelled at random"})
        except httpx.HTTPError:
            return
        self.cancels[c.status_code] = self.cancels.get(c.status_code, 0) + 1
        if c.status_code == 500:
            self.server_errors.append(f"POST /sagas/…/cancel: {c.text[:200]}")

    async def send(self, count: int, rate: float) -> None:
        """Sends the next ``count`` orders at ``rate`` a second; returns once the last one is
        on its way (``finish`` waits for the answers)."""
        t0 = time.monotonic()
        for n in range(count):
            await asyncio.sleep(max(0.0, t0 + n / rate - time.monotonic()))
            self._placing.append(asyncio.create_task(self.place(self.sent)))
            self.sent += 1

    async def finish(self) -> None:
        await asyncio.gather(*self._placing)

    def skus(self) -> list[str]:
        return list(self.initial)


async def verdict(load: OrderLoad, quiesce_s: float = 240.0, *,
                  expect_no_manual_refund: bool = False) -> tuple[Snapshot, list[Violation]]:
    """Once every order of the load is settled (or ``quiesce_s`` passed): the snapshot and the
    invariants it breaks, with every 500 the load was answered (503 is the answer while the
    database is away: nothing was done, retry; 500 never is). ``expect_no_manual_refund``: the
    gateway always came back and answered, so no payment may be left for a refund by hand."""
    await quiesce(load.acknowledged, load.skus(), quiesce_s)
    snap = await snapshot.take(load.acknowledged, load.initial)
    violations = check(snap) + [Violation("http", e) for e in load.server_errors]
    return snap, violations + (no_manual_refund(snap) if expect_no_manual_refund else [])


async def run(name: str, faults: list[Fault], *, seed: int = 0, rate: float = 5.0,
              load_s: float = 20.0, skus: int = 3, units: int = 12,
              quiesce_s: float = 240.0, cancel_share: float = 0.0,
              expect_no_manual_refund: bool = False, measure_recovery: bool = False) -> Report:
    """Orders at ``rate`` for ``load_s`` (``OrderLoad``, to every pedidos instance) while the
    faults happen; healed, settled, checked. ``measure_recovery``: how long the sagas waited
    around each fault, held to ``recovery.BOUND_S`` (while it lasts with more than one
    instance of every service, after it ends with one)."""
    report = Report(name, faults, survivors=replicas.replicas() > 1)
    started = time.monotonic()
    stack.up()
    # Authenticated as the stack's users: orders as their customer, the rest as an operator.
    async with httpx.AsyncClient(timeout=10, auth=StackAuth()) as http:
        load = await OrderLoad.stocked(http, seed=seed, skus=skus, units=units,
                                       cancel_share=cancel_share)
        chaos = [asyncio.create_task(_delayed(f)) for f in faults]
        await load.send(int(rate * load_s), rate)
        await load.finish()
        windows = await asyncio.gather(*chaos)
    report.orders_sent, report.acknowledged, report.cancels = (load.sent, load.acknowledged,
                                                               load.cancels)
    await _heal()
    snap, report.violations = await verdict(load, quiesce_s,
                                            expect_no_manual_refund=expect_no_manual_refund)
    for o in snap.orders.values():
        report.outcomes[o.status] = report.outcomes.get(o.status, 0) + 1
    report.strategies, report.reservations = load.strategies, reservations_checked(snap)
    report.garbled_calls = len(snap.garbled)
    if measure_recovery:
        steps = await recovery.steps_of(load.acknowledged, load.skus())
        report.recoveries = [recovery.measure(w, steps) for w in windows]
        report.violations += [v for r in report.recoveries
                              if (v := recovery.beyond_bound(r, report.survivors))]
    report.seconds = time.monotonic() - started
    return report


async def _heal() -> None:
    """Anything still down comes back (a part may still be restarting: try a few times)."""
    await clear_network_faults()
    for attempt in range(3):
        try:
            await asyncio.to_thread(stack.up)
            return
        except RuntimeError:
            if attempt == 2:
                raise
            await asyncio.sleep(2)


async def _delayed(fault: Fault) -> Window:
    await asyncio.sleep(fault.at_s)
    return await _inject(fault)


async def busy(order_ids: list[str], skus: Sequence[str] = ()) -> int:
    """Orders of the run (acknowledged, or for its products) not terminal yet, plus payments
    of theirs that pagos still has gateway work for, or has yet to hear were cancelled: a
    charge that failed, or one captured, for an order that ended without completing (pedidos
    ends an order that timed out at once and the undoing follows); plus reservations of
    theirs inventario still holds for an order that ended (its OrdenCancelada on its way)."""
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        held = ("(SELECT count(*) FROM inventario.reservations r JOIN run ON run.saga_id::text "
                "= r.saga_id WHERE run.status = ANY($2::text[]) AND r.status = 'RESERVED' "
                "AND r.expires_at > now())" if await snapshot.has_reservations(conn) else "0")
        return int(await conn.fetchval(
            "WITH run AS (SELECT order_id, saga_id, status FROM pedidos.orders o "
            "WHERE order_id = ANY($1::uuid[]) OR EXISTS (SELECT 1 FROM "
            "jsonb_array_elements(o.items) i WHERE i->>'sku' = ANY($3::text[]))) "
            "SELECT (SELECT count(*) FROM run WHERE NOT status = ANY($2::text[])) + "
            "(SELECT count(*) FROM pagos.payments p JOIN run ON run.saga_id::text = "
            "p.saga_id WHERE p.status IN ('CHARGING', 'CANCEL_REQUESTED', 'REFUNDING') "
            "OR (run.status = ANY($2::text[]) AND run.status <> 'COMPLETADA' "
            f"AND p.status IN ('CHARGE_FAILED', 'CAPTURED'))) + {held}",
            order_ids, list(TERMINAL), list(skus)))
    finally:
        await conn.close()


async def quiesce(order_ids: list[str], skus: list[str], timeout: float) -> None:
    """Until every order of the run (acknowledged, or for its products) is terminal and pagos
    and inventario have no work left for them; returns at the deadline regardless (the checker then says
    what is stuck)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if await busy(order_ids, skus) == 0:
                return
        except (OSError, asyncpg.PostgresError):
            pass
        await asyncio.sleep(0.5)
