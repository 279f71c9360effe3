"""Topic provisioning: one source of partitions, replication factor and min ISR; topics that
are missing are created with them, those that exist are compared and never altered."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sagakit.kafka_topics import TopicSettings, TopicState, compare, provision_topics


class FakeAdmin:
    """A cluster's topics as aiokafka's admin describes them: name → (partitions, replicas)."""

    def __init__(self, topics: dict[str, tuple[int, int]]) -> None:
        self.topics = topics
        self.created: list[Any] = []

    async def list_topics(self) -> list[str]:
        return list(self.topics)

    async def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        return [{"topic": n, "error_code": 0,
                 "partitions": [{"partition": i, "replicas": list(range(self.topics[n][1]))}
                                for i in range(self.topics[n][0])]} for n in names]

    async def create_topics(self, topics: list[Any]) -> None:
        self.created += topics


def test_the_settings_come_from_the_kafka_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_TOPIC_PARTITIONS", "12")
    monkeypatch.setenv("KAFKA_REPLICATION_FACTOR", "3")
    monkeypatch.setenv("KAFKA_MIN_INSYNC_REPLICAS", "2")
    s = TopicSettings()
    assert (s.topic_partitions, s.replication_factor, s.min_insync_replicas) == (12, 3, 2)
    topic = s.new_topic("order-events")
    assert (topic.num_partitions, topic.replication_factor) == (12, 3)
    assert topic.topic_configs == {"min.insync.replicas": "2",
                                   "unclean.leader.election.enable": "false"}


def test_a_min_isr_above_the_replication_factor_is_refused(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setenv("KAFKA_REPLICATION_FACTOR", "1")
    monkeypatch.setenv("KAFKA_MIN_INSYNC_REPLICAS", "2")
    with pytest.raises(ValidationError, match="no write could ever be acknowledged"):
        TopicSettings()


async def test_missing_topics_are_created_and_existing_ones_compared() -> None:
    settings = TopicSettings.model_validate({"KAFKA_REPLICATION_FACTOR": "3",
                                             "KAFKA_MIN_INSYNC_REPLICAS": "2"})
    admin = FakeAdmin({"order-events": (6, 3), "inventory-events": (6, 1)})
    states = await provision_topics(admin, settings,
                                    ["order-events", "inventory-events", "payment-events"])
    assert states == [
        TopicState("order-events", "present"),
        TopicState("inventory-events", "differs", "replication factor 1 (settings: 3)"),
        TopicState("payment-events", "created")]
    assert [(t.name, t.num_partitions, t.replication_factor) for t in admin.created] == [
        ("payment-events", 6, 3)]


def test_compare_names_every_difference() -> None:
    missing, states = compare({"a": (3, 1)}, TopicSettings(), ["a", "b"])
    assert missing == ["b"]
    assert states == [TopicState("a", "differs", "3 partitions (settings: 6)")]
