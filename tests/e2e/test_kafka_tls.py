"""Kafka's TLS listener (SASL/SCRAM over TLS, ``KAFKA_TLS_PORT``): a client that trusts the
stack's CA and authenticates gets in; one that trusts another CA, speaks without TLS or has the
wrong password does not; and the services run the saga over it (SAGA_KAFKA_TLS=1).

Marker ``kafka_auth``: the listener exists only on a stack whose Kafka authenticates."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, SaslAuthenticationFailed

from saga_contracts import topics
from saga_harness import config, stack
from saga_harness.clients import Saga, new_sku, order_body
from sagakit.kafka import client_security
from sagakit.settings import KafkaClientSettings

pytestmark = [pytest.mark.kafka_auth, pytest.mark.usefixtures("running_stack")]

DEADLINE_S = 20
SERVICES = ("pedidos", "inventario", "pagos")


def tls_client(principal: str = "admin", *, cafile: Path | None = None,
               password: str | None = None, protocol: str = "SASL_SSL") -> dict[str, Any]:
    fields = config.kafka_fields(principal)
    return client_security(KafkaClientSettings(**{
        **fields, "kafka_bootstrap_servers": config.KAFKA_TLS,
        "kafka_security_protocol": protocol,
        "kafka_ssl_cafile": str(cafile or config.STATE / "secrets" / "kafka-ca.pem"),
        "kafka_sasl_password": password or fields["kafka_sasl_password"]}))


async def list_topics(client: dict[str, Any]) -> set[str]:
    admin = AIOKafkaAdminClient(**client, request_timeout_ms=5000)
    try:
        await asyncio.wait_for(admin.start(), DEADLINE_S)
        return set(await asyncio.wait_for(admin.list_topics(), DEADLINE_S))
    finally:
        await admin.close()


async def test_a_client_that_trusts_the_stacks_ca_and_authenticates_gets_in() -> None:
    assert set(topics.ALL_TOPICS) <= await list_topics(tls_client())


async def test_a_client_that_trusts_another_ca_does_not_connect(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from local_stack import kafka_tls, secrets

    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "other-ca")
    other_ca = kafka_tls.ca_file()
    with pytest.raises((KafkaError, OSError, TimeoutError)):
        await list_topics(tls_client(cafile=other_ca))
    # The same client with the stack's CA: the refusal came from the certificate alone.
    assert await list_topics(tls_client())


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "PLAINTEXT"])
async def test_a_client_without_tls_is_not_served_on_the_tls_listener(protocol: str) -> None:
    with pytest.raises((KafkaError, OSError, TimeoutError)):
        await list_topics(tls_client(protocol=protocol))


async def test_the_wrong_password_over_tls_is_refused() -> None:
    with pytest.raises((SaslAuthenticationFailed, KafkaError, OSError, TimeoutError)):
        await list_topics(tls_client("pagos", password="not-the-password"))
    assert await list_topics(tls_client("pagos"))


def _kafka_ports_of(service: str) -> set[int]:
    """The remote ports of the Kafka connections the service's processes hold."""
    group = psutil.Process(stack.pid(service))
    ports = set()
    for proc in [group, *group.children(recursive=True)]:
        for conn in proc.net_connections(kind="tcp"):
            if conn.raddr and conn.status == psutil.CONN_ESTABLISHED:
                ports.add(conn.raddr.port)
    return ports & {int(config.KAFKA.rsplit(":", 1)[1]), int(config.KAFKA_TLS.rsplit(":", 1)[1])}


@pytest.fixture
def services_over_tls() -> Iterator[None]:
    try:
        for service in SERVICES:
            stack.restart(service, {"SAGA_KAFKA_TLS": "1"})
        yield
    finally:
        for service in SERVICES:
            stack.restart(service)


@pytest.mark.usefixtures("services_over_tls")
async def test_the_services_run_the_saga_over_tls(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 1)
    placed = await saga.place(order_body([(sku, 1)]))
    done = await saga.wait_terminal(placed["order_id"], timeout=60)
    assert done["status"] == "COMPLETADA"
    tls_port = int(config.KAFKA_TLS.rsplit(":", 1)[1])
    for service in SERVICES:
        assert _kafka_ports_of(service) == {tls_port}, service
