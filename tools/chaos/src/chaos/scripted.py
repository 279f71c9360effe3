"""The scripted scenarios of ``make chaos``: each a fault schedule, the stack it needs, its load
and what it checks beyond the invariants. The tests of ``make test`` run the same scenarios,
shorter (tests/e2e/test_gateway_faults.py, tests/e2e/test_hung_instances.py).

Two kinds of scenario were added for faults that are slow, partial or silent rather than
crashes:

- The gateway. Down (every connection to it refused) for longer than the payment step's
  deadline, so that orders are cancelled while their charge's outcome cannot be known, then
  back: no payment may be left for a manual
  refund (``expect_no_manual_refund``). Answering some calls with a page that is not its API's
  (the charge may have been made), or with garbage, and then answering after pagos' timeout.
- An instance that hangs or is cut off but does not die: the relay's leader paused (SIGSTOP),
  cut off from PostgreSQL by a black hole (packets held, the connection left open: no FIN or
  RST reaches the database) or from Kafka; a consumer paused past its group's session timeout.
  Their time to recover is measured (``chaos.recovery``): with two instances of every service
  the sagas must keep moving while the fault lasts, with one they must resume once it ends,
  within ``recovery.BOUND_S`` either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from chaos import scenario
from chaos.scenario import Fault, Report
from saga_harness.config import STATE

# The stacks the scenarios run on: the variables that say how ``python -m local_stack up`` starts it.
PROXIED: MappingProxyType[str, str] = MappingProxyType({"SAGA_NETPROXY": "1"})
"""Every service behind the TCP proxy (network faults)."""
PROXIED_REPLICAS: MappingProxyType[str, str] = MappingProxyType(
    {"SAGA_NETPROXY": "1", "SAGA_REPLICAS": "2"})
"""Two instances of every service, each behind routes of its own."""
REPLICAS: MappingProxyType[str, str] = MappingProxyType({"SAGA_REPLICAS": "2"})
BROKERS3: MappingProxyType[str, str] = MappingProxyType(
    {"SAGA_KAFKA_BROKERS": "3", "SAGA_KAFKA_HOME": str(STATE / "kafka3")})
"""Kafka's data is formatted for a number of brokers: three keep theirs elsewhere."""
STACK_KINDS = (PROXIED, PROXIED_REPLICAS, REPLICAS, BROKERS3)

# Stock enough that no order is refused for want of it: the orders of these scenarios are
# there to reach the step the fault is about.
AMPLE = 100_000
# Orders are under way before the fault strikes and keep arriving after it ends.
LEAD_IN_S = 5.0
TAIL_S = 10.0
# sagakit.kafka's consumers: a member that does not heartbeat for this long is evicted and
# its partitions are given to the others.
CONSUMER_SESSION_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Timings:
    """The settings in force that a gateway scenario's schedule is made from (read from the
    environment, as the stack's parts read them)."""

    payment_deadline_s: float
    gateway_timeout_s: float
    charge_schedule_s: tuple[float, ...]
    resolve_attempts: int

    @classmethod
    def of_environment(cls) -> Timings:
        from pagos.config import PagosSettings
        from pedidos.config import PedidosSettings

        pagos = PagosSettings()
        return cls(PedidosSettings().payment_timeout_s, pagos.gateway_timeout_s,
                   pagos.charge_retry_schedule_s, pagos.resolve_attempts)

    @property
    def resolution_s(self) -> float:
        """How long pagos goes on asking the gateway about a cancelled charge whose outcome is
        unknown: the waits between its ``resolve_attempts`` calls."""
        schedule = self.charge_schedule_s
        return sum(schedule[min(j, len(schedule)) - 1] for j in range(1, self.resolve_attempts))


@dataclass(frozen=True)
class Scripted:
    faults: tuple[Fault, ...]
    stack: MappingProxyType[str, str] = field(default_factory=lambda: PROXIED)
    load_s: float = 20.0
    units: int = 12
    """Of each of three products: 12 makes orders compete for stock."""
    expect_no_manual_refund: bool = False
    measure_recovery: bool = False

    async def run(self, name: str, *, rate: float, seed: int = 0, **options: Any) -> Report:
        return await scenario.run(name, list(self.faults), seed=seed, rate=rate,
                                  load_s=self.load_s, units=self.units,
                                  expect_no_manual_refund=self.expect_no_manual_refund,
                                  measure_recovery=self.measure_recovery, **options)


def gateway_outage(t: Timings) -> Scripted:
    """The gateway down for longer than the payment step's deadline while orders arrive:
    charges fail, orders are cancelled at their deadline while the gateway is still down, and
    pagos must find out what became of each charge once it is back. It comes back halfway
    through the resolution of the first cancelled charges, so that each of them still has
    calls to make (two at least: a first answer may be a transient 503 of its own): none may
    be left for a refund by hand.

    Down is pagos' route to it refusing and resetting every connection, as a dead process's
    port does: unlike a killed gateway, whose start takes from one second to several on a
    loaded machine, it is back the moment the schedule says."""
    down_s = t.payment_deadline_s + t.resolution_s / 2
    return Scripted((Fault(2.0, "reset", "pagos-gateway", down_s),), load_s=2.0 + down_s + 3.0,
                    units=AMPLE, expect_no_manual_refund=True)


def gateway_garbled(t: Timings, garble_s: float = 20.0, share: float = 0.25) -> Scripted:
    """pagos' route to the gateway answers a share of the calls with an HTML page after
    forwarding them (the charge or refund may have been made) and another share with garbage
    without forwarding them; then every call is delayed past pagos' timeout (the gateway acts
    on it; pagos has given up waiting). Every call so answered must be recorded as one whose
    outcome is unknown (``checker.gateway_calls_recorded``) and the money must balance."""
    late_s = t.gateway_timeout_s + 1.0
    return Scripted((Fault(2.0, "html", "pagos-gateway", garble_s, share=share),
                     Fault(2.0, "garbage", "pagos-gateway", garble_s, share=share),
                     Fault(3.0 + garble_s, "latency", "pagos-gateway", late_s,
                           latency_s=late_s)),
                    load_s=3.0 + garble_s + late_s + 3.0, units=AMPLE)


def hung_or_cut_off(kind: str, part: str, seconds: float, stack: MappingProxyType[str, str],
                    lead_in_s: float = LEAD_IN_S, tail_s: float = TAIL_S) -> Scripted:
    """``part`` paused (``kind`` "pause") or cut off (``kind`` "blackhole" on its routes) for
    ``seconds`` while orders arrive, from ``lead_in_s`` until ``tail_s`` after it ends; the
    time the sagas took to recover is measured."""
    return Scripted((Fault(lead_in_s, kind, part, seconds),), stack=stack,
                    load_s=lead_in_s + seconds + tail_s, units=AMPLE, measure_recovery=True)


def hung_or_cut_off_scenarios(seconds: float, consumer_seconds: float, stack:
                              MappingProxyType[str, str]) -> dict[str, Scripted]:
    """The relay's leader paused, cut off from PostgreSQL, cut off from Kafka, each for
    ``seconds``; a consumer paused past its session timeout for ``consumer_seconds``."""
    return {
        "paused-relay-leader": hung_or_cut_off("pause", "pedidos@leader", seconds, stack),
        "relay-leader-cut-from-postgres": hung_or_cut_off(
            "blackhole", "pedidos@leader-postgres", seconds, stack),
        "relay-leader-cut-from-kafka": hung_or_cut_off(
            "blackhole", "pedidos@leader-kafka", seconds, stack),
        # inventario's: its consumer is on every saga's path (validation, allocation). With
        # two instances, one whose relay stands by: the consumer alone is at stake.
        "paused-consumer": hung_or_cut_off("pause", "inventario@standby", consumer_seconds,
                                           stack),
    }


def scripted(t: Timings | None = None) -> dict[str, Scripted]:
    """Every scripted scenario of ``make chaos``, by name."""
    t = t or Timings.of_environment()
    plain = {
        # The second of docs/standard.md#failure-scenarios: the broker goes away during sagas and comes back.
        "broker-outage": [Fault(3.0, "kill", "kafka", 8.0)],
        # A service killed mid-flight (commit done, acknowledgement not) and a database crash.
        "kill-services-and-db": [Fault(2.0, "kill", "inventario", 2.0),
                                 Fault(6.0, "kill", "postgres", 2.0),
                                 Fault(11.0, "kill", "pagos", 2.0)],
        "pause-everything-once": [Fault(2.0, "pause", p, 1.5) for p in
                                  ("pedidos", "inventario", "pagos", "gateway", "kafka",
                                   "postgres")],
        # The third of docs/standard.md#failure-scenarios, under load: every query of every service
        # slowed by 10 s for a while (handler timeouts, retries, step deadlines), then the database
        # frozen by SIGSTOP.
        "slow-database": [*(Fault(2.0, "latency", f"{s}-postgres", 8.0, latency_s=10.0)
                            for s in scenario.SERVICES),
                          Fault(12.0, "pause", "postgres", 3.0)],
        # The network between the services and their dependencies: a partition from Kafka,
        # resets of the database connections, a payment gateway that answers in seconds.
        "network-partitions": [Fault(2.0, "blackhole", "pagos-kafka", 5.0),
                               Fault(4.0, "reset", "inventario-postgres", 2.0),
                               Fault(6.0, "latency", "pagos-gateway", 6.0, latency_s=3.0),
                               Fault(9.0, "blackhole", "pedidos-postgres", 3.0)],
    }
    runs = {name: Scripted(tuple(faults)) for name, faults in plain.items()}
    runs |= {
        # Instances of every service die under load, the relay's leader among them
        # (instance 1 usually leads: it started first). Down 6 s, less than the consumer
        # group's session timeout (10 s): the restarted instance joins before the dead one is
        # evicted; then the other instances, down long enough for the group to give their
        # partitions away.
        "replicas": Scripted((*(Fault(2.0, "kill", p, 6.0)
                                for p in ("pedidos", "inventario-2", "pagos")),
                              *(Fault(9.0, "kill", p, 11.0)
                                for p in ("pedidos-2", "inventario", "pagos-2"))),
                             stack=REPLICAS),
        # A broker dies and comes back; then two at once: the one left is below
        # min.insync.replicas=2 and the controller quorum is lost, so every send waits and the
        # outboxes grow until they return.
        "broker-failure": Scripted((Fault(2.0, "kill", "kafka-2", 4.0),
                                    Fault(12.0, "kill", "kafka-3+kafka-2", 6.0)),
                                   stack=BROKERS3),
        "gateway-outage": gateway_outage(t),
        "gateway-garbled": gateway_garbled(t),
    }
    hung = {"seconds": 60.0, "consumer_seconds": CONSUMER_SESSION_TIMEOUT_S + 10.0}
    runs |= hung_or_cut_off_scenarios(**hung, stack=PROXIED)
    runs |= {f"{name}-x2": s for name, s in
             hung_or_cut_off_scenarios(**hung, stack=PROXIED_REPLICAS).items()}
    return runs
