"""Kafka clients configured for the saga's guarantees."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.helpers import create_ssl_context

from sagakit.settings import KafkaClientSettings


def client_security(settings: KafkaClientSettings) -> dict[str, Any]:
    """The arguments every aiokafka client (producer, consumer, admin) takes to reach the brokers
    as the principal ``settings`` names: ``bootstrap_servers`` and the security ones. The one
    place that maps the ``KAFKA_*`` settings, so that no client of the project can forget one."""
    kwargs: dict[str, Any] = {"bootstrap_servers": settings.kafka_bootstrap_servers,
                              "security_protocol": settings.kafka_security_protocol}
    if settings.kafka_security_protocol.startswith("SASL_"):
        password = settings.kafka_sasl_password
        kwargs |= {"sasl_mechanism": settings.kafka_sasl_mechanism,
                   "sasl_plain_username": settings.kafka_sasl_username,
                   "sasl_plain_password": password.get_secret_value() if password else None}
    if settings.kafka_security_protocol.endswith("SSL"):
        kwargs["ssl_context"] = create_ssl_context(cafile=settings.kafka_ssl_cafile)
    return kwargs


def durable_producer(settings: KafkaClientSettings, client_id: str) -> AIOKafkaProducer:
    """acks=all plus idempotence: a retried send is written once, in order, per partition."""
    return AIOKafkaProducer(
        **client_security(settings),
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        # No linger: the relay hands over a whole batch before the sender runs, so waiting for
        # more would only add latency to every hop.
        linger_ms=0,
        # aiokafka keeps one batch per partition in the accumulator and one request in flight
        # per broker: with 16 KB batches a relay batch of 200 events needs several rounds,
        # each paying the service's event-loop latency under load.
        max_batch_size=512 * 1024,
        request_timeout_ms=10_000,
        retry_backoff_ms=100,
        metadata_max_age_ms=30_000,
    )


def manual_commit_consumer(settings: KafkaClientSettings, group_id: str, topics: list[str],
                           client_id: str, fetch_max_wait_ms: int,
                           listener: ConsumerRebalanceListener | None = None
                           ) -> AIOKafkaConsumer:
    """Offsets are committed by the consumer loop, only after the local transaction;
    ``listener`` hears of rebalances before and after they happen."""
    consumer = AIOKafkaConsumer(
        **client_security(settings),
        group_id=group_id,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        fetch_max_wait_ms=fetch_max_wait_ms,
        # How often aiokafka's fetch task looks round when nothing wakes it (200 ms by default:
        # five idle wake-ups a second per consumer). Fetch responses, consumed records,
        # resumed partitions and rebalances wake it at once anyway.
        consumer_timeout_ms=1_000,
        max_poll_interval_ms=300_000,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=3_000,  # Kafka's advice: a third of the session timeout
        retry_backoff_ms=100,
        metadata_max_age_ms=30_000,
    )
    consumer.subscribe(topics=topics, listener=listener)
    return consumer
