"""A chaos scenario: orders at a steady rate with contention, a fault schedule, healing,
quiescence, then the invariant check. Schedules are random but seeded (reproducible) or
scripted; every fault is undone before the check."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from chaos import snapshot
from chaos.checker import TERMINAL, Violation, check
from netproxy.layout import CONTROL_PORT, stack_routes
from saga_harness import config, stack
from saga_harness.identity import StackAuth

SERVICES = ["pedidos", "inventario", "pagos"]
PARTS = [*SERVICES, "gateway", "kafka", "postgres"]
# Network faults go through the TCP proxy of tools/netproxy (the stack started with
# SAGA_NETPROXY=1).
NETWORK_KINDS = ["latency", "blackhole", "reset"]
ROUTES = sorted(stack_routes(0, 0))
CONTROL = f"http://127.0.0.1:{CONTROL_PORT}"


@dataclass(frozen=True)
class Fault:
    at_s: float          # after the start of the load
    kind: str            # kill | pause | latency | blackhole | reset
    part: str            # a part of the stack, or a proxy route for network faults
    duration_s: float    # down, paused or degraded for this long
    latency_s: float = 0.0

    def __str__(self) -> str:
        extra = f" +{self.latency_s:g}s" if self.kind == "latency" else ""
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
        kind = rng.choice(NETWORK_KINDS)
        chosen.append(Fault(round(rng.uniform(1.0, load_s - 4.0), 1), kind, rng.choice(ROUTES),
                            round(rng.uniform(1.0, 4.0), 1),
                            round(rng.uniform(0.2, 3.0), 1) if kind == "latency" else 0.0))
    return sorted(chosen, key=lambda f: f.at_s)


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

    def render(self) -> str:
        lines = [f"scenario {self.name} ({self.seconds:.0f}s)",
                 "  faults: " + ("; ".join(str(f) for f in self.faults) or "none"),
                 f"  orders: {self.orders_sent} sent, {len(self.acknowledged)} acknowledged, "
                 f"{sum(self.outcomes.values())} in the database",
                 f"  outcomes: {self.outcomes}",
                 *([f"  cancellations answered: {self.cancels}"] if self.cancels else []),
                 "  invariants: " + ("all hold" if not self.violations else
                                     f"{len(self.violations)} VIOLATED")]
        lines += [f"    - {v}" for v in self.violations]
        return "\n".join(lines)


async def _inject(fault: Fault) -> None:
    if fault.kind in NETWORK_KINDS:
        await _network_fault(fault)
    elif fault.kind == "pause":
        if not _signal(fault.part, signal.SIGSTOP):
            return  # killed by an earlier fault and not back yet: nothing to pause
        await asyncio.sleep(fault.duration_s)
        _signal(fault.part, signal.SIGCONT)
    else:
        await asyncio.to_thread(stack.stack, "kill", fault.part)
        await asyncio.sleep(fault.duration_s)
        # Other faults may be in force: start it and let it find its way back on its own.
        await asyncio.to_thread(stack.stack, "start", fault.part, "--no-wait", check=False)


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


async def _network_fault(fault: Fault) -> None:
    route = f"{CONTROL}/routes/{fault.part}"
    async with httpx.AsyncClient(timeout=5) as http:
        if fault.kind == "latency":
            (await http.put(route, json={"latency_s": fault.latency_s})).raise_for_status()
        elif fault.kind == "blackhole":
            (await http.put(route, json={"blackhole": True})).raise_for_status()
        else:  # reset what is open, refuse what comes, for the duration
            (await http.put(route, json={"refuse": True})).raise_for_status()
            (await http.post(f"{route}/reset")).raise_for_status()
        await asyncio.sleep(fault.duration_s)
        (await http.put(route, json={"latency_s": 0, "blackhole": False, "refuse": False})
         ).raise_for_status()


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


async def run(name: str, faults: list[Fault], *, seed: int = 0, rate: float = 5.0,
              load_s: float = 20.0, skus: int = 3, units: int = 12,
              quiesce_s: float = 240.0, cancel_share: float = 0.0) -> Report:
    """``cancel_share`` of the orders are cancelled through the API a random 0–150 ms after
    they were accepted: cancellations racing every step of the saga, under the faults."""
    rng = random.Random(seed)
    report = Report(name, faults)
    started = time.monotonic()
    stack.up()
    initial = {f"CHAOS-{uuid.uuid4().hex[:8]}": units for _ in range(skus)}
    # Authenticated as the stack's users: orders as their customer, the rest as an operator.
    async with httpx.AsyncClient(timeout=10, auth=StackAuth()) as http:
        for sku, qty in initial.items():
            # Priced as _body orders it: an order at another price would be refused.
            (await http.put(f"{config.INVENTARIO}/products/{sku}",
                            json={"quantity": qty, "price": "2.50", "currency": "USD"})
             ).raise_for_status()

        server_errors: list[str] = []

        async def place(i: int) -> None:
            token = ("tok_chargeDeclined" if i % 10 == 9 else
                     "tok_transient1" if i % 10 == 4 else "tok_visa")
            body = _body(rng.choice(list(initial)), rng.randint(1, 2), token,
                         f"chaos-{i % CUSTOMERS}")
            cancel_after = rng.uniform(0, 0.150) if rng.random() < cancel_share else None
            try:
                r = await http.post(f"{config.PEDIDOS}/orders", json=body)
                if r.status_code == 500:
                    server_errors.append(f"POST /orders: {r.text[:200]}")
                if r.status_code != 202:
                    return
                report.acknowledged.append(r.json()["order_id"])
                if cancel_after is None:
                    return
                # The workload's timing: the cancellation lands wherever the saga is then.
                await asyncio.sleep(cancel_after)
                c = await http.post(f"{config.PEDIDOS}/sagas/{r.json()['saga_id']}/cancel")
                report.cancels[c.status_code] = report.cancels.get(c.status_code, 0) + 1
                if c.status_code == 500:
                    server_errors.append(f"POST /sagas/…/cancel: {c.text[:200]}")
            except httpx.HTTPError:
                pass  # not acknowledged: the client would retry; nothing was promised

        chaos = [asyncio.create_task(_delayed(f)) for f in faults]
        t0 = time.monotonic()
        sends = []
        total = int(rate * load_s)
        for i in range(total):
            await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
            sends.append(asyncio.create_task(place(i)))
        report.orders_sent = total
        await asyncio.gather(*sends)
        await asyncio.gather(*chaos)
    await _heal()
    await _quiesce(report.acknowledged, list(initial), quiesce_s)
    snap = await snapshot.take(report.acknowledged, initial)
    for o in snap.orders.values():
        report.outcomes[o.status] = report.outcomes.get(o.status, 0) + 1
    # 503 is the answer while the database is away (nothing was done; retry); 500 never is.
    report.violations = check(snap) + [Violation("http", e) for e in server_errors]
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


async def _delayed(fault: Fault) -> None:
    await asyncio.sleep(fault.at_s)
    await _inject(fault)


async def _quiesce(order_ids: list[str], skus: list[str], timeout: float) -> None:
    """Until every order of the run (acknowledged, or for its products) is terminal and pagos
    has no work left for them."""
    import asyncpg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = await asyncpg.connect(config.admin_dsn())
            try:
                busy = await conn.fetchval(
                    "WITH run AS (SELECT order_id, saga_id, status FROM pedidos.orders o "
                    "WHERE order_id = ANY($1::uuid[]) OR EXISTS (SELECT 1 FROM "
                    "jsonb_array_elements(o.items) i WHERE i->>'sku' = ANY($3::text[]))) "
                    "SELECT (SELECT count(*) FROM run WHERE NOT status = ANY($2::text[])) + "
                    "(SELECT count(*) FROM pagos.payments p JOIN run ON run.saga_id::text = "
                    "p.saga_id WHERE p.status IN ('CHARGING', 'CANCEL_REQUESTED', 'REFUNDING'))",
                    order_ids, list(TERMINAL), skus)
            finally:
                await conn.close()
            if busy == 0:
                return
        except (OSError, asyncpg.PostgresError):
            pass
        await asyncio.sleep(0.5)
