"""`make chaos`: seeded random fault schedules plus the standard's scripted scenarios.

    python -m chaos                  # seeds 1..20 and the scripted scenarios
    python -m chaos --seed 7         # replay one seed
    CHAOS_SEEDS=5 python -m chaos    # fewer seeds
    CHAOS_RATE=5 python -m chaos     # orders per second (default 20)
    python -m chaos --scripted replicas --scripted broker-failure

Every service reaches PostgreSQL, Kafka and the gateway through the TCP proxy of tools/netproxy
(SAGA_NETPROXY=1), so schedules can add latency, black holes and resets on those routes.

Two scripted schedules need a stack started otherwise (``STACKS``), which this command starts
for them, after the others, and stops again: "replicas" runs on SAGA_REPLICAS=2 (instances of
every service killed and restarted, orders sent to both pedidos instances), "broker-failure"
on SAGA_KAFKA_BROKERS=3 (one broker killed, then two at once). The three-broker stack keeps its
Kafka under .local/kafka3 (SAGA_KAFKA_HOME): Kafka's data is formatted for a number of brokers,
and the one-broker stack's own stays as it was. Neither runs behind the TCP proxy (it routes one
broker, and one instance of each service).

The report is printed and written, scenario by scenario, to
chaos-results/chaos-<UTC timestamp>.txt (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import UTC, datetime

import httpx

from chaos import scenario
from saga_harness import stack
from saga_harness.config import ROOT, STATE

OUT = ROOT / "chaos-results"

SCRIPTED = {
    # Part IV §3.3 scenario 2: the broker goes away during sagas and comes back.
    "broker-outage": [scenario.Fault(3.0, "kill", "kafka", 8.0)],
    # A service killed mid-flight (commit done, acknowledgement not) and a database crash.
    "kill-services-and-db": [scenario.Fault(2.0, "kill", "inventario", 2.0),
                             scenario.Fault(6.0, "kill", "postgres", 2.0),
                             scenario.Fault(11.0, "kill", "pagos", 2.0)],
    "pause-everything-once": [scenario.Fault(2.0, "pause", p, 1.5) for p in
                              ("pedidos", "inventario", "pagos", "gateway", "kafka", "postgres")],
    # Part IV §3.3 scenario 3 under load: every query of every service slowed by 10 s for a
    # while (handler timeouts, retries, step deadlines), then the database frozen by SIGSTOP.
    "slow-database": [*(scenario.Fault(2.0, "latency", f"{s}-postgres", 8.0, latency_s=10.0)
                        for s in scenario.SERVICES),
                      scenario.Fault(12.0, "pause", "postgres", 3.0)],
    # The network between the services and their dependencies: a partition from Kafka, resets
    # of the database connections, a payment gateway that answers in seconds.
    "network-partitions": [scenario.Fault(2.0, "blackhole", "pagos-kafka", 5.0),
                           scenario.Fault(4.0, "reset", "inventario-postgres", 2.0),
                           scenario.Fault(6.0, "latency", "pagos-gateway", 6.0, latency_s=3.0),
                           scenario.Fault(9.0, "blackhole", "pedidos-postgres", 3.0)],
    # Issue 35: instances of every service die under load, the relay's leader among them
    # (instance 1 usually leads: it started first). Down 6 s, less than the consumer group's
    # session timeout (10 s): the restarted instance joins before the dead one is evicted;
    # then the other instances, down long enough for the group to give their partitions away.
    "replicas": [*(scenario.Fault(2.0, "kill", p, 6.0) for p in ("pedidos", "inventario-2",
                                                                  "pagos")),
                 *(scenario.Fault(9.0, "kill", p, 11.0) for p in ("pedidos-2", "inventario",
                                                                   "pagos-2"))],
    # A broker dies and comes back; then two at once: the one left is below
    # min.insync.replicas=2 and the controller quorum is lost, so every send waits and the
    # outboxes grow until they return.
    "broker-failure": [scenario.Fault(2.0, "kill", "kafka-2", 4.0),
                       scenario.Fault(12.0, "kill", "kafka-3+kafka-2", 6.0)],
}

# The variables that say how the stack is started, and the stack each schedule runs on
# (every other schedule: behind the TCP proxy).
STACK_VARIABLES = ("SAGA_NETPROXY", "SAGA_REPLICAS", "SAGA_KAFKA_BROKERS", "SAGA_KAFKA_HOME")
PROXIED = {"SAGA_NETPROXY": "1"}
STACKS = {
    "replicas": {"SAGA_REPLICAS": "2"},
    "broker-failure": {"SAGA_KAFKA_BROKERS": "3", "SAGA_KAFKA_HOME": str(STATE / "kafka3")},
}


def stack_for(name: str) -> dict[str, str]:
    return STACKS.get(name, PROXIED)


def in_stack_order(names: list[str]) -> list[str]:
    """The runs grouped by the stack they need, the proxied stack's first (in their order), so
    that the stack is restarted as few times as can be."""
    kinds = [PROXIED, *STACKS.values()]
    return sorted(names, key=lambda n: kinds.index(stack_for(n)))


async def use_stack(wanted: dict[str, str], current: dict[str, str] | None) -> dict[str, str]:
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
    parser = argparse.ArgumentParser(description="chaos scenarios with the invariant check")
    parser.add_argument("--seed", type=int, action="append")
    parser.add_argument("--scripted", action="append", choices=sorted(SCRIPTED))
    parser.add_argument("--rate", type=float, default=float(os.environ.get("CHAOS_RATE", "20")))
    parser.add_argument("--load-seconds", type=float, default=20.0)
    args = parser.parse_args()
    if args.seed or args.scripted:
        seeds = args.seed or []
        scripted = args.scripted or []
    else:
        seeds = list(range(1, int(os.environ.get("CHAOS_SEEDS", "20")) + 1))
        scripted = sorted(SCRIPTED)
    runs = [(f"seed-{s}", scenario.random_schedule(s, args.load_seconds, network=2), s)
            for s in seeds]
    runs += [(name, SCRIPTED[name], 0) for name in in_stack_order(scripted)]
    OUT.mkdir(exist_ok=True)
    path = OUT / f"chaos-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.txt"

    def say(text: str) -> None:
        print(text, flush=True)
        with path.open("a") as out:
            out.write(text + "\n")

    failed = 0
    current: dict[str, str] | None = None
    for name, faults, seed in runs:
        # Network faults need every service behind the TCP proxy; two schedules need more
        # instances or brokers: the stack is (re)started as the run needs it.
        current = await use_stack(stack_for(name), current)
        try:
            # The random schedules also cancel a third of their orders at random moments.
            report = await scenario.run(name, faults, seed=seed, rate=args.rate,
                                        load_s=args.load_seconds,
                                        cancel_share=0.3 if name.startswith("seed-") else 0.0)
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
