"""The KAFKA_* settings become the aiokafka arguments of every client (sagakit.kafka.client_security)."""

from __future__ import annotations

import ssl

import pytest
from aiokafka import AIOKafkaProducer

from sagakit.kafka import client_security
from sagakit.settings import KafkaClientSettings, MessagingSettings

KAFKA_VARIABLES = ("KAFKA_BOOTSTRAP_SERVERS", "KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM",
                   "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_SSL_CAFILE")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KAFKA_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_by_default_a_client_speaks_plaintext_to_the_local_broker() -> None:
    assert client_security(KafkaClientSettings()) == {
        "bootstrap_servers": "127.0.0.1:9092", "security_protocol": "PLAINTEXT"}


def test_sasl_settings_from_the_environment_name_the_principal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "broker:9092")
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "sasl_plaintext")
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "pedidos")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "from-the-environment")

    kwargs = client_security(MessagingSettings())

    assert kwargs == {"bootstrap_servers": "broker:9092", "security_protocol": "SASL_PLAINTEXT",
                      "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "pedidos",
                      "sasl_plain_password": "from-the-environment"}


def test_the_password_is_not_in_the_settings_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = KafkaClientSettings(kafka_security_protocol="SASL_PLAINTEXT",
                                   kafka_sasl_username="pagos",
                                   kafka_sasl_password="not-to-be-printed")
    assert "not-to-be-printed" not in repr(settings)
    assert "not-to-be-printed" not in str(settings.model_dump())


def test_sasl_ssl_gets_a_tls_context_that_verifies_the_broker() -> None:
    settings = KafkaClientSettings(kafka_security_protocol="SASL_SSL",
                                   kafka_sasl_mechanism="SCRAM-SHA-256",
                                   kafka_sasl_username="admin", kafka_sasl_password="x")

    kwargs = client_security(settings)

    assert kwargs["security_protocol"] == "SASL_SSL"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-256"
    context = kwargs["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_sasl_without_a_principal_stops_the_client_with_a_message() -> None:
    with pytest.raises(ValueError, match="KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD"):
        KafkaClientSettings(kafka_security_protocol="SASL_PLAINTEXT")


def test_an_unknown_protocol_or_mechanism_is_refused() -> None:
    with pytest.raises(ValueError, match="KAFKA_SECURITY_PROTOCOL"):
        KafkaClientSettings(kafka_security_protocol="SASL")
    with pytest.raises(ValueError, match="KAFKA_SASL_MECHANISM"):
        KafkaClientSettings(kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism="GSSAPI",
                            kafka_sasl_username="a", kafka_sasl_password="b")


async def test_aiokafka_accepts_the_arguments() -> None:
    settings = KafkaClientSettings(kafka_security_protocol="SASL_PLAINTEXT",
                                   kafka_sasl_username="inventario", kafka_sasl_password="x")
    producer = AIOKafkaProducer(**client_security(settings))  # not started: no broker needed
    assert producer.client._security_protocol == "SASL_PLAINTEXT"
    assert producer.client._sasl_plain_username == "inventario"
