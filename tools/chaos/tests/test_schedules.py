"""The scripted schedules: each names only parts the stack it runs on has, its faults are over
before the load ends, and the runs are grouped by the stack they need; the gateway's schedules
follow the settings in force."""

from __future__ import annotations

import pytest

from chaos import targets
from chaos.__main__ import in_stack_order, stack_for
from chaos.scripted import (
    BROKERS3,
    PROXIED,
    PROXIED_REPLICAS,
    REPLICAS,
    Timings,
    gateway_outage,
    scripted,
)
from netproxy.layout import stack_routes

# The defaults: 60 s for the payment step, 30 s per call, retries after 2, 8 and 18 s, five
# calls to resolve a cancelled charge.
DEFAULTS = Timings(60.0, 30.0, (2.0, 8.0, 18.0), 5)
SCRIPTED = scripted(DEFAULTS)


def _parts_of(stack: dict[str, str]) -> set[str]:
    replicas = int(stack.get("SAGA_REPLICAS", "1"))
    brokers = int(stack.get("SAGA_KAFKA_BROKERS", "1"))
    services = ("pedidos", "inventario", "pagos")
    return ({"gateway", "postgres", "kafka", *services}
            | {f"{s}-{k}" for s in services for k in range(2, replicas + 1)}
            | {f"kafka-{k}" for k in range(2, brokers + 1)})


@pytest.mark.parametrize("name", sorted(SCRIPTED))
def test_a_schedule_names_only_parts_of_its_stack(name: str) -> None:
    run = SCRIPTED[name]
    stack = dict(run.stack)
    parts = _parts_of(stack)
    routes = set(stack_routes(0, 0, int(stack.get("SAGA_REPLICAS", "1"))))
    for fault in run.faults:
        if fault.kind in ("kill", "pause"):
            named = {p.partition("@")[0] for p in fault.part.split("+")}
            assert named <= parts, (name, fault)
        else:
            assert stack.get("SAGA_NETPROXY") == "1", (name, fault)
            instance, dependency = targets.split_route(fault.part)
            assert f"{instance.partition('@')[0]}-{dependency}" in routes, (name, fault)
        assert fault.at_s + fault.duration_s <= run.load_s, (name, fault)


def test_the_replica_and_broker_schedules_need_their_stacks() -> None:
    assert stack_for("replicas") == REPLICAS
    assert stack_for("broker-failure") == BROKERS3
    # Kafka's data is formatted for a number of brokers: three brokers keep theirs elsewhere.
    assert stack_for("broker-failure")["SAGA_KAFKA_HOME"].endswith("kafka3")
    assert stack_for("kill-services-and-db") == PROXIED
    assert stack_for("paused-relay-leader") == PROXIED
    assert stack_for("paused-relay-leader-x2") == PROXIED_REPLICAS


def test_runs_are_grouped_by_stack_the_proxied_ones_first() -> None:
    names = ["broker-failure", "slow-database", "paused-consumer-x2", "replicas",
             "broker-outage"]
    assert in_stack_order(names) == ["slow-database", "broker-outage", "paused-consumer-x2",
                                     "replicas", "broker-failure"]


def test_every_hung_or_cut_off_instance_is_measured_on_one_and_on_two_instances() -> None:
    measured = {name for name, run in SCRIPTED.items() if run.measure_recovery}
    assert measured == {f"{n}{x}" for n in ("paused-relay-leader", "relay-leader-cut-from-postgres",
                                            "relay-leader-cut-from-kafka", "paused-consumer")
                        for x in ("", "-x2")}
    assert SCRIPTED["paused-relay-leader"].faults[0].duration_s == 60.0
    # Past the consumer group's session timeout (10 s): the group gives its partitions away.
    assert SCRIPTED["paused-consumer"].faults[0].duration_s > 10.0


def test_the_gateway_comes_back_while_cancelled_charges_are_still_being_resolved() -> None:
    # Five calls resolve a cancelled charge, 2 + 8 + 18 + 18 s apart.
    assert DEFAULTS.resolution_s == 46.0
    outage = SCRIPTED["gateway-outage"]
    assert outage.expect_no_manual_refund
    (down,) = outage.faults
    # pagos' connections to it refused, back halfway through the 46 s: the calls at 28 and
    # 46 s of the first resolutions are answered.
    assert (down.kind, down.part, down.duration_s) == ("reset", "pagos-gateway", 60.0 + 23.0)
    # The test settings (deploy/local/test.env: calls 0.5, 1, 2 and 2 s apart) and a payment
    # step of 6 s: back 2.75 s after the first deadlines, before the calls at 3.5 and 5.5 s.
    short = gateway_outage(Timings(6.0, 2.0, (0.5, 1.0, 2.0), 5))
    assert short.faults[0].duration_s == 6.0 + 2.75


def test_the_gateway_answers_late_past_pagos_timeout() -> None:
    late = [f for f in SCRIPTED["gateway-garbled"].faults if f.kind == "latency"]
    assert late and late[0].latency_s > DEFAULTS.gateway_timeout_s


def test_a_target_names_an_instance_and_a_dependency() -> None:
    assert targets.split_route("pedidos@leader-kafka") == ("pedidos@leader", "kafka")
    assert targets.split_route("pagos-2-gateway") == ("pagos-2", "gateway")
    with pytest.raises(ValueError):
        targets.split_route("pedidos@leader")
