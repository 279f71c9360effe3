"""Who is who to the local stack's Kafka: the principals and the client settings of each."""

from __future__ import annotations

from local_stack.settings import KAFKA_BOOTSTRAP
from sagakit.settings import KafkaClientSettings


def admin_client_settings() -> KafkaClientSettings:
    """The stack's own client (topics, readiness)."""
    return KafkaClientSettings(kafka_bootstrap_servers=KAFKA_BOOTSTRAP)
