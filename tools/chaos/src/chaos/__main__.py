"""`make chaos`: seeded random fault schedules plus the standard's scripted scenarios.

    python -m chaos                  # seeds 1..20 and the scripted scenarios
    python -m chaos --seed 7         # replay one seed
    CHAOS_SEEDS=5 python -m chaos    # fewer seeds
    CHAOS_RATE=5 python -m chaos     # orders per second (default 20)
    python -m chaos --scripted replicas --scripted broker-failure

Every service reaches PostgreSQL, Kafka and the gateway through the TCP proxy of tools/netproxy
(SAGA_NETPROXY=1), so schedules can add latency, black holes and resets on those routes.

Some scripted schedules need a stack started otherwise (``chaos.scripted``), which this command
starts for them, after the others, and stops again: "replicas" runs on SAGA_REPLICAS=2
(instances of every service killed and restarted, orders sent to both pedidos instances),
"broker-failure" on SAGA_KAFKA_BROKERS=3 (one broker killed, then two at once), and the "-x2"
schedules of a hung or cut-off instance on SAGA_REPLICAS=2 behind the proxy (each instance
through routes of its own). The three-broker stack keeps its Kafka under .local/kafka3
(SAGA_KAFKA_HOME): Kafka's data is formatted for a number of brokers, and the one-broker stack's
own stays as it was.

The report is printed and written, scenario by scenario, to
chaos-results/chaos-<UTC timestamp>.txt (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime

import httpx

from chaos import scenario
from chaos.scripted import PROXIED, STACK_KINDS, scripted
from saga_harness import stack
from saga_harness.config import ROOT

OUT = ROOT / "chaos-results"

# The variables that say how the stack is started.
STACK_VARIABLES = ("SAGA_NETPROXY", "SAGA_REPLICAS", "SAGA_KAFKA_BROKERS", "SAGA_KAFKA_HOME")


def stack_for(name: str) -> Mapping[str, str]:
    """The stack a run needs (the random schedules': behind the TCP proxy)."""
    runs = scripted()
    return runs[name].stack if name in runs else PROXIED


def in_stack_order(names: list[str]) -> list[str]:
    """The runs grouped by the stack they need, the proxied stack's first (in their order), so
    that the stack is restarted as few times as can be."""
    return sorted(names, key=lambda n: STACK_KINDS.index(stack_for(n)))


async def use_stack(wanted: Mapping[str, str], current: Mapping[str, str] | None
                    ) -> Mapping[str, str]:
    """Stops the stack that runs (with the environment it was started with) unless it is the
    one wanted, and sets the environment for the next ``up``; the scenario starts it."""
    if wanted != current and not (current is None and wanted == PROXIED
                                  and await _proxy_running()):
        stack.stack("down")
    for name in STACK_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(wanted)
    return wanted


async def _proxy_running() -> bool:
    try:
        async with httpx.AsyncClient(timeout=2) as http:
            return (await http.get(f"{scenario.CONTROL}/health")).status_code == 200
    except httpx.HTTPError:
        return False


async def main() -> int:
    # One order in ten is declined on purpose, with one test card, from a few customers: the
    # decline limits of POST /orders (against card testing) would refuse most of the load; and
    # while a fault holds the sagas up, their orders wait for their payment by the hundred, over
    # the caps on one customer's and one card's waiting orders.
    for limit in ("PEDIDOS_DECLINES_PER_CUSTOMER", "PEDIDOS_DECLINES_PER_CARD",
                  "PEDIDOS_WAITING_ORDERS_PER_CUSTOMER", "PEDIDOS_WAITING_ORDERS_PER_CARD"):
        os.environ.setdefault(limit, "100000")
    scenarios = scripted()  # read once, from the settings in force
    parser = argparse.ArgumentParser(description="chaos scenarios with the invariant check")
    parser.add_argument("--seed", type=int, action="append")
    parser.add_argument("--scripted", action="append", choices=sorted(scenarios))
    parser.add_argument("--rate", type=float, default=float(os.environ.get("CHAOS_RATE", "20")))
    parser.add_argument("--load-seconds", type=float, default=20.0)
    args = parser.parse_args()
    if args.seed or args.scripted:
        seeds = args.seed or []
        chosen = args.scripted or []
    else:
        seeds = list(range(1, int(os.environ.get("CHAOS_SEEDS", "20")) + 1))
        chosen = sorted(scenarios)
    runs = [(f"seed-{s}", s) for s in seeds] + [(name, 0) for name in in_stack_order(chosen)]
    OUT.mkdir(exist_ok=True)
    path = OUT / f"chaos-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.txt"

    def say(text: str) -> None:
        print(text, flush=True)
        with path.open("a") as out:
            out.write(text + "\n")

    failed = 0
    current: Mapping[str, str] | None = None
    for name, seed in runs:
        # Network faults need every service behind the TCP proxy; some schedules need more
        # instances or brokers: the stack is (re)started as the run needs it.
        current = await use_stack(stack_for(name), current)
        try:
            if name in scenarios:
                report = await scenarios[name].run(name, rate=args.rate)
            else:
                # The random schedules also cancel a third of their orders at random moments.
                report = await scenario.run(
                    name, scenario.random_schedule(seed, args.load_seconds, network=2),
                    seed=seed, rate=args.rate, load_s=args.load_seconds, cancel_share=0.3)
        except RuntimeError as exc:  # the stack could not be healed: that is a failure too
            say(f"scenario {name}: the stack did not recover: {exc}")
            failed += 1
            continue
        say(report.render())
        failed += bool(report.violations)
    say(f"\n{len(runs) - failed} of {len(runs)} scenarios kept every invariant")
    print(f"report: {path}", flush=True)
    # The stack is left as `make up` leaves it, not behind the proxy: a `make test` next starts
    # proxies of its own on the proxy's ports (tests/e2e/test_slow_database.py).
    stack.stack("down")
    for variable in STACK_VARIABLES:
        os.environ.pop(variable, None)
    stack.up()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
