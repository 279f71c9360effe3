"""Kafka authenticates every client and authorizes it per topic and group.

Run against a stack whose Kafka authenticates, the default (marker ``kafka_auth``; run-tests.sh
deselects them on a stack started with SAGA_KAFKA_AUTH=0). On a stack without authentication
every one of them fails: the refused operations succeed there. Each refusal is paired with what
the same principal may do, so that a refusal cannot come from a client that simply could not
connect."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
)

from saga_contracts import topics
from saga_harness import config
from saga_harness.kafka import envelope

pytestmark = [pytest.mark.kafka_auth, pytest.mark.usefixtures("running_stack")]

# Long enough for a broker to answer, short enough that a refused client does not hold the run.
DEADLINE_S = 20
PLAINTEXT = {"bootstrap_servers": config.KAFKA, "security_protocol": "PLAINTEXT"}
FAST = {"request_timeout_ms": 5000, "metadata_max_age_ms": 5000}


async def refused(action: Callable[[], Awaitable[Any]],
                  error: type[BaseException] | tuple[type[BaseException], ...] = (
                      KafkaError, OSError, TimeoutError)) -> None:
    """``action`` ends in ``error``, not a success. A client without credentials gets no error
    code: the SASL listener closes its connection, so it only fails to bootstrap."""
    with pytest.raises(error):
        await asyncio.wait_for(action(), DEADLINE_S)


async def produce_as(client: dict[str, Any], topic: str, value: bytes) -> None:
    producer = AIOKafkaProducer(**client, **FAST, acks="all", enable_idempotence=True)
    try:
        await producer.start()
        await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


async def consume_as(client: dict[str, Any], topic: str, group: str | None) -> None:
    """Joins ``group`` (None: no group) and fetches from ``topic`` once."""
    consumer = AIOKafkaConsumer(topic, **client, **FAST, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="latest")
    try:
        await consumer.start()
        await consumer.getmany(timeout_ms=2000)
        if group is not None:
            await consumer.commit()
    finally:
        await consumer.stop()


def forged_payment() -> bytes:
    return json.dumps(envelope("PagoExitoso", {
        "order_id": str(uuid.uuid4()), "payment_id": str(uuid.uuid4()),
        "charge_id": "ch_forged", "amount": "10.00", "currency": "USD"},
        source="pagos")).encode()


@pytest.mark.parametrize("topic", topics.ALL_TOPICS)
async def test_a_client_without_credentials_cannot_produce(topic: str) -> None:
    await refused(lambda: produce_as(PLAINTEXT, topic, forged_payment()))


@pytest.mark.parametrize("topic", topics.ALL_TOPICS)
async def test_a_client_without_credentials_cannot_consume(topic: str) -> None:
    await refused(lambda: consume_as(PLAINTEXT, topic, None))


@pytest.mark.parametrize("group", ["pedidos", "inventario", "pagos", f"intruder-{uuid.uuid4()}"])
async def test_a_client_without_credentials_cannot_join_a_group(group: str) -> None:
    await refused(lambda: consume_as(PLAINTEXT, topics.ORDER_EVENTS, group))


async def test_inventario_cannot_write_a_pago_exitoso_to_payment_events() -> None:
    inventario = config.kafka_client("inventario")
    # Its credentials work: it may write to its own dead-letter topic, which no service reads.
    await asyncio.wait_for(produce_as(inventario, topics.dead_letter_topic("inventario"),
                                      b"kafka-auth test: inventario may write here"), DEADLINE_S)

    await refused(lambda: produce_as(inventario, topics.PAYMENT_EVENTS, forged_payment()),
                  TopicAuthorizationFailedError)


@pytest.mark.parametrize(("service", "other"), [("pagos", "inventario"), ("pedidos", "pagos"),
                                                ("inventario", "pedidos")])
async def test_a_service_cannot_join_another_services_group(service: str, other: str) -> None:
    readable = {"pedidos": topics.PAYMENT_EVENTS, "inventario": topics.ORDER_EVENTS,
                "pagos": topics.ORDER_EVENTS}[service]
    client = config.kafka_client(service)
    # It may read the topic without a group: the refusal below is the group's.
    await asyncio.wait_for(consume_as(client, readable, None), DEADLINE_S)

    await refused(lambda: consume_as(client, readable, other), GroupAuthorizationFailedError)


@pytest.mark.parametrize(("service", "topic"), [("inventario", topics.INVENTORY_EVENTS),
                                                ("pagos", topics.PAYMENT_EVENTS),
                                                ("pedidos", topics.ORDER_EVENTS),
                                                ("pagos", "pedidos-dlq")])
async def test_a_service_cannot_read_a_topic_it_does_not_consume(service: str,
                                                                  topic: str) -> None:
    await refused(lambda: consume_as(config.kafka_client(service), topic, None),
                  TopicAuthorizationFailedError)


async def test_a_wrong_password_is_refused() -> None:
    pedidos = config.kafka_client("pedidos")
    await asyncio.wait_for(produce_as(pedidos, topics.dead_letter_topic("pedidos"),
                                      b"kafka-auth test: pedidos may write here"), DEADLINE_S)

    impostor = pedidos | {"sasl_plain_password": "not-the-password"}
    # aiokafka logs the SaslAuthenticationFailed and reports that it could not bootstrap.
    await refused(lambda: produce_as(impostor, topics.dead_letter_topic("pedidos"), b"x"),
                  (SaslAuthenticationFailed, KafkaConnectionError))


def harmless_event() -> bytes:
    """An event of order-events that no consumer handles (pedidos writes it, nobody reads it
    but the read side): its consumers skip it."""
    return json.dumps(envelope("OrdenCompletada", {"order_id": str(uuid.uuid4()),
                                                   "total_amount": "1.00", "currency": "USD"},
                               source="pedidos")).encode()


async def test_the_operator_reads_and_writes_the_domain_topics_without_a_group() -> None:
    """What a replay needs: re-read the original by partition, publish the replay."""
    operator = config.kafka_client("operator")
    await asyncio.wait_for(consume_as(operator, topics.PAYMENT_EVENTS, None), DEADLINE_S)
    await asyncio.wait_for(produce_as(operator, topics.ORDER_EVENTS, harmless_event()),
                           DEADLINE_S)


@pytest.mark.parametrize("topic", topics.DLQ_TOPICS)
async def test_the_operator_cannot_write_or_read_a_dead_letter_topic(topic: str) -> None:
    operator = config.kafka_client("operator")
    await refused(lambda: produce_as(operator, topic, b"kafka-auth test: never written"),
                  TopicAuthorizationFailedError)
    await refused(lambda: consume_as(operator, topic, None), TopicAuthorizationFailedError)


@pytest.mark.parametrize("group", ["pedidos", "operator"])
async def test_the_operator_joins_no_consumer_group(group: str) -> None:
    await refused(lambda: consume_as(config.kafka_client("operator"), topics.ORDER_EVENTS,
                                     group), GroupAuthorizationFailedError)
