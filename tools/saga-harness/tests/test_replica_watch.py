"""What the replica tests read: who leads a relay round by round, and a consumer group's
members as its coordinator describes them."""

from __future__ import annotations

from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.protocol.admin import DescribeGroupsResponse_v0, DescribeGroupsResponse_v3

from local_stack.settings import SERVICE_PORTS
from saga_harness.kafka import group_members
from saga_harness.replicas import Instance, LeaderHistory, Round


def _rounds(*roles: tuple[float, str | None, str | None]) -> LeaderHistory:
    history = LeaderHistory("pedidos")
    history.rounds = [Round(at, {"pedidos": a, "pedidos-2": b}) for at, a, b in roles]
    return history


def test_one_leader_throughout_has_no_gap() -> None:
    h = _rounds((0.0, "leader", "standby"), (0.2, "leader", "standby"), (0.4, "leader", None))
    assert h.two_leaders() == []
    assert h.longest_leaderless_s() == 0.0


def test_a_takeover_shows_as_the_time_without_a_leader() -> None:
    h = _rounds((0.0, "leader", "standby"), (0.2, None, "standby"), (0.4, None, "standby"),
                (1.1, None, "leader"), (1.3, "standby", "leader"))
    assert h.two_leaders() == []
    assert h.longest_leaderless_s() == 1.1 - 0.2


def test_a_gap_that_never_ends_lasts_to_the_last_round() -> None:
    h = _rounds((0.0, "leader", "standby"), (0.5, None, "standby"), (3.0, None, "standby"))
    assert h.longest_leaderless_s() == 2.5


def test_two_instances_leading_at_once_are_caught() -> None:
    h = _rounds((0.0, "leader", "standby"), (0.2, "leader", "leader"))
    assert [r.at for r in h.two_leaders()] == [0.2]


def test_instances_follow_the_port_contract() -> None:
    second = Instance("inventario", 2)
    assert second.part == "inventario-2"
    assert second.url == f"http://127.0.0.1:{SERVICE_PORTS['inventario'] + 100}"
    assert Instance("pagos", 1).part == "pagos"


def _member(member_id: str, topics: list[str], assigned: dict[str, list[int]]) -> tuple:  # type: ignore[type-arg]
    metadata = ConsumerProtocolMemberMetadata(0, topics, b"").encode()
    assignment = ConsumerProtocolMemberAssignment(0, list(assigned.items()), b"").encode()
    return (member_id, "pedidos-consumer", "/127.0.0.1", metadata, assignment)


def test_a_group_description_names_each_members_partitions() -> None:
    described = DescribeGroupsResponse_v3(0, [(0, "pedidos", "Stable", "consumer", "range", [
        _member("m1", ["inventory-events", "payment-events"],
                {"inventory-events": [0, 1, 2], "payment-events": [0]}),
        _member("m2", ["inventory-events", "payment-events"], {"payment-events": [1, 2]}),
    ], 0)])
    state, members = group_members(described)
    assert state == "Stable"
    assert [m.member_id for m in members] == ["m1", "m2"]
    assert members[0].subscription == ("inventory-events", "payment-events")
    assert members[0].assigned == {("inventory-events", p) for p in (0, 1, 2)} | {
        ("payment-events", 0)}
    assert members[1].assigned == {("payment-events", 1), ("payment-events", 2)}


def test_a_rebalancing_group_has_members_without_partitions() -> None:
    described = DescribeGroupsResponse_v0([(0, "pagos", "PreparingRebalance", "consumer", "",
                                            [("m1", "pagos-consumer", "/127.0.0.1", b"", b"")])])
    state, members = group_members(described)
    assert state == "PreparingRebalance"
    assert members[0].assigned == frozenset() and members[0].subscription == ()
