"""The saga's topics as a cluster must have them: partitions, replication factor and
``min.insync.replicas`` from ``TopicSettings`` (one source of truth), unclean leader election
off. ``provision_topics`` creates those missing, on any cluster the ``KAFKA_*`` client settings
reach (``sagactl topics``, and the local stack at its start), and says which existing ones
differ; it never alters a topic (more partitions move keys between partitions, and with them
the order of a saga's events; a new replication factor is a reassignment): an operator does.

Producers write with ``acks=all``: a write is acknowledged once ``min.insync.replicas`` replicas
have it, so with a replication factor of 3 and a minimum of 2 one broker may be lost without
losing an acknowledged event, and with two lost the producers wait (and retry) rather than
write to one copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sagakit.settings import KafkaClientSettings

# Also the partitions of the topics of docker-compose.yml and deploy/k8s, and so the most
# consumers of a group that get work: the Kubernetes autoscalers stop there.
DEFAULT_TOPIC_PARTITIONS = 6


class TopicSettings(BaseSettings):
    """How the saga's topics are made (read by ``sagactl topics`` and the local stack)."""

    model_config = SettingsConfigDict(extra="ignore")

    topic_partitions: int = Field(DEFAULT_TOPIC_PARTITIONS, ge=1,
                                  validation_alias="KAFKA_TOPIC_PARTITIONS", description=(
        "Partitions of each saga topic when it is created: the most replicas of a service that "
        "consume at once (a consumer beyond it gets no partition)."))
    replication_factor: int = Field(1, ge=1, validation_alias="KAFKA_REPLICATION_FACTOR",
                                    description=(
        "Copies of each partition when a topic is created (3 on a cluster of three brokers or "
        "more); at most the number of brokers."))
    min_insync_replicas: int = Field(1, ge=1, validation_alias="KAFKA_MIN_INSYNC_REPLICAS",
                                     description=(
        "Copies a write must reach before Kafka acknowledges it (producers use acks=all): 2 with "
        "a replication factor of 3, so that one broker may be lost; at most the replication "
        "factor."))

    @model_validator(mode="after")
    def _isr_within_replicas(self) -> Self:
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(f"KAFKA_MIN_INSYNC_REPLICAS={self.min_insync_replicas} is more than "
                             f"KAFKA_REPLICATION_FACTOR={self.replication_factor}: no write "
                             "could ever be acknowledged")
        return self

    def topic_configs(self) -> dict[str, str]:
        return {"min.insync.replicas": str(self.min_insync_replicas),
                "unclean.leader.election.enable": "false"}

    def new_topic(self, name: str, partitions: int | None = None) -> Any:
        """aiokafka's ``NewTopic`` for ``name`` (``partitions``: a scratch topic's own count)."""
        from aiokafka.admin import NewTopic

        return NewTopic(name, num_partitions=partitions or self.topic_partitions,
                        replication_factor=self.replication_factor,
                        topic_configs=self.topic_configs())


@dataclass(frozen=True)
class TopicState:
    name: str
    state: str
    """``created``, ``present`` (as the settings say) or ``differs`` (see ``detail``)."""
    detail: str = ""


def compare(existing: Mapping[str, tuple[int, int]], settings: TopicSettings,
            names: Sequence[str]) -> tuple[list[str], list[TopicState]]:
    """The topics to create, and the state of those that exist; ``existing``: name → (its
    partitions, its replication factor)."""
    missing = [n for n in names if n not in existing]
    states = []
    for name in names:
        if name not in existing:
            continue
        partitions, replicas = existing[name]
        differences = []
        if partitions != settings.topic_partitions:
            differences.append(f"{partitions} partitions (settings: {settings.topic_partitions})")
        if replicas != settings.replication_factor:
            differences.append(f"replication factor {replicas} "
                               f"(settings: {settings.replication_factor})")
        states.append(TopicState(name, "differs", ", ".join(differences)) if differences
                      else TopicState(name, "present"))
    return missing, states


async def provision_topics(admin: Any, settings: TopicSettings, names: Sequence[str]
                           ) -> list[TopicState]:
    """Creates the topics of ``names`` that ``admin`` (a started ``AIOKafkaAdminClient``) does
    not list; describes the others."""
    listed = set(await admin.list_topics())
    described = await admin.describe_topics([n for n in names if n in listed]) if listed else []
    existing = {t["topic"]: (len(t["partitions"]),
                             len(t["partitions"][0]["replicas"]) if t["partitions"] else 0)
                for t in described if t.get("error_code", 0) == 0}
    missing, states = compare(existing, settings, names)
    if missing:
        await admin.create_topics([settings.new_topic(n) for n in missing])
    order = {n: i for i, n in enumerate(names)}
    return sorted([*states, *(TopicState(n, "created") for n in missing)],
                  key=lambda s: order[s.name])


def admin_client(client: KafkaClientSettings, request_timeout_ms: int = 5000) -> Any:
    """An ``AIOKafkaAdminClient`` (not started) as the principal ``client`` names."""
    from aiokafka.admin import AIOKafkaAdminClient

    from sagakit.kafka import client_security

    return AIOKafkaAdminClient(**client_security(client), request_timeout_ms=request_timeout_ms)
