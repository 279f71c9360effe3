"""The local stack's Kafka brokers (SAGA_KAFKA_BROKERS, 1 by default): each one a KRaft node that
is both a broker and a voter of the controller quorum (three voters: one may be lost), with
its own part name, ports, data directory and configuration file; and the durability settings
they all share, from the same ``TopicSettings`` the saga's topics are made with.

Broker k (1-based) is the part ``kafka`` (k = 1) or ``kafka-k``, its client listener on
KAFKA_PORT + 100·(k−1) and its controller listener on KAFKA_CONTROLLER_PORT + 100·(k−1); the
first keeps the paths of a one-broker stack, so that its data survives going to three.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from local_stack.settings import (
    KAFKA_BROKERS,
    KAFKA_CONTROLLER_PORT,
    KAFKA_DIR,
    KAFKA_PORT,
    KAFKA_TLS_PORT,
    instance_port,
)
from sagakit.kafka_topics import TopicSettings


@dataclass(frozen=True)
class Broker:
    node_id: int
    port: int
    controller_port: int
    home: Path = KAFKA_DIR

    @property
    def part(self) -> str:
        return "kafka" if self.node_id == 1 else f"kafka-{self.node_id}"

    @property
    def tls_port(self) -> int:
        """Its SASL_SSL listener's (local_stack.kafka_tls), when clients authenticate."""
        return instance_port(KAFKA_TLS_PORT, self.node_id)

    @property
    def data(self) -> Path:
        return self.home / ("data" if self.node_id == 1 else f"data-{self.node_id}")

    @property
    def config(self) -> Path:
        return self.home / ("server.properties" if self.node_id == 1
                            else f"server-{self.node_id}.properties")


def brokers(count: int = KAFKA_BROKERS, home: Path = KAFKA_DIR) -> list[Broker]:
    return [Broker(k, instance_port(KAFKA_PORT, k), instance_port(KAFKA_CONTROLLER_PORT, k), home)
            for k in range(1, count + 1)]


def broker_named(part: str) -> Broker | None:
    return next((b for b in brokers() if b.part == part), None)


def quorum_voters(cluster: list[Broker]) -> str:
    return ",".join(f"{b.node_id}@127.0.0.1:{b.controller_port}" for b in cluster)


def replication_properties(topics: TopicSettings, count: int) -> str:
    """What every broker says about copies: its topics' defaults (a topic made by another tool
    gets the same), and the internal topics' (consumer offsets, transactions), which must
    survive the loss of a broker as the saga's topics do. Unclean leader election stays off:
    a replica that missed acknowledged writes never becomes leader."""
    if topics.replication_factor > count:
        raise SystemExit(f"[stack] KAFKA_REPLICATION_FACTOR={topics.replication_factor} needs as "
                         f"many brokers; SAGA_KAFKA_BROKERS={count}")
    rf, isr = topics.replication_factor, topics.min_insync_replicas
    return "\n".join([
        "auto.create.topics.enable=false",
        "unclean.leader.election.enable=false",
        f"min.insync.replicas={isr}",
        f"default.replication.factor={rf}",
        f"num.partitions={topics.topic_partitions}",
        f"offsets.topic.replication.factor={rf}",
        f"transaction.state.log.replication.factor={rf}",
        f"transaction.state.log.min.isr={isr}",
        f"share.coordinator.state.topic.replication.factor={rf}",
        f"share.coordinator.state.topic.min.isr={isr}",
    ])


def node_placeholders(broker: Broker, cluster: list[Broker], topics: TopicSettings
                      ) -> dict[str, str]:
    """The values of deploy/local/kafka/server.properties' placeholders that differ from one
    broker to the next, or follow the cluster's size."""
    return {"${NODE_ID}": str(broker.node_id), "${QUORUM_VOTERS}": quorum_voters(cluster),
            "${KAFKA_PORT}": str(broker.port), "${CONTROLLER_PORT}": str(broker.controller_port),
            "${KAFKA_DATA}": str(broker.data),
            "${REPLICATION}": replication_properties(topics, len(cluster))}
