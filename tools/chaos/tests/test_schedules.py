"""The scripted schedules: each names only parts the stack it runs on has, its faults are over
before the load ends, and the runs are grouped by the stack they need."""

from __future__ import annotations

import pytest

from chaos.__main__ import PROXIED, SCRIPTED, STACKS, in_stack_order, stack_for

LOAD_S = 20.0  # python -m chaos's default --load-seconds


def _parts_of(stack: dict[str, str]) -> set[str]:
    replicas = int(stack.get("SAGA_REPLICAS", "1"))
    brokers = int(stack.get("SAGA_KAFKA_BROKERS", "1"))
    services = ("pedidos", "inventario", "pagos")
    return ({"gateway", "postgres", "kafka", *services}
            | {f"{s}-{k}" for s in services for k in range(2, replicas + 1)}
            | {f"kafka-{k}" for k in range(2, brokers + 1)})


@pytest.mark.parametrize("name", sorted(SCRIPTED))
def test_a_schedule_names_only_parts_of_its_stack(name: str) -> None:
    parts = _parts_of(stack_for(name))
    for fault in SCRIPTED[name]:
        if fault.kind in ("kill", "pause"):
            assert set(fault.part.split("+")) <= parts, (name, fault)
        assert fault.at_s + fault.duration_s <= LOAD_S, (name, fault)


def test_the_replica_and_broker_schedules_need_their_stacks() -> None:
    assert stack_for("replicas")["SAGA_REPLICAS"] == "2"
    assert stack_for("broker-failure")["SAGA_KAFKA_BROKERS"] == "3"
    # Kafka's data is formatted for a number of brokers: three brokers keep theirs elsewhere.
    assert stack_for("broker-failure")["SAGA_KAFKA_HOME"].endswith("kafka3")
    assert stack_for("kill-services-and-db") == PROXIED


def test_runs_are_grouped_by_stack_the_proxied_ones_first() -> None:
    names = ["broker-failure", "slow-database", "replicas", "broker-outage"]
    assert in_stack_order(names) == ["slow-database", "broker-outage", "replicas",
                                     "broker-failure"]
    assert set(STACKS) <= set(SCRIPTED)
