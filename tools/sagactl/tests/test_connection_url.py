"""Where sagactl connects: the URL and the Kafka principal it is given, or else, in a checkout,
the local stack's sagactl_reader role (never the admin) and its ``operator`` Kafka principal
(never ``admin``) with the passwords the stack generated; never a password of its own."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from local_stack import kafka_auth, secrets
from sagactl import connection, operator_access


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    for name in ("SAGACTL_DATABASE_URL", "PG_ADMIN_PASSWORD",
                 "SAGACTL_READER_PASSWORD", "SAGACTL_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name in ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME",
                 "KAFKA_SASL_PASSWORD", "KAFKA_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "secrets"


def test_the_url_it_is_given_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets.password("postgres-admin")
    monkeypatch.setenv("SAGACTL_DATABASE_URL", "postgresql://operator@db.example/saga")
    assert connection.reader_dsn() == "postgresql://operator@db.example/saga"


def test_in_a_checkout_it_reads_as_the_stacks_sagactl_reader_never_the_admin() -> None:
    secrets.password("postgres-admin")
    generated = secrets.password("sagactl-reader")
    url = urlsplit(connection.reader_dsn())
    assert (url.username, url.password, url.hostname) == ("sagactl_reader", generated,
                                                          "127.0.0.1")


def test_without_a_url_or_a_generated_password_it_stops_and_says_why(_scratch: Path) -> None:
    secrets.password("postgres-admin")  # an admin password is no reason to read as the admin
    with pytest.raises(SystemExit, match="SAGACTL_DATABASE_URL"):
        connection.reader_dsn()


def test_in_a_checkout_it_speaks_to_kafka_as_the_stacks_operator_never_admin(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_auth, "KAFKA_AUTH", True)
    secrets.password("kafka-admin")
    generated = secrets.password("kafka-operator")
    kafka = operator_access.kafka()
    assert (kafka.kafka_security_protocol, kafka.kafka_sasl_mechanism) == \
        ("SASL_PLAINTEXT", "SCRAM-SHA-512")
    assert kafka.kafka_sasl_username == "operator"
    assert kafka.kafka_sasl_password is not None
    assert kafka.kafka_sasl_password.get_secret_value() == generated


def test_without_the_operators_password_it_stops_and_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_auth, "KAFKA_AUTH", True)
    secrets.password("kafka-admin")  # there, and never taken instead
    with pytest.raises(SystemExit, match="no operator principal"):
        operator_access.kafka()


def test_the_kafka_principal_it_is_given_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_auth, "KAFKA_AUTH", True)
    secrets.password("kafka-admin")
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "operator")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "given")
    kafka = operator_access.kafka()
    assert (kafka.kafka_security_protocol, kafka.kafka_sasl_username) == ("SASL_SSL", "operator")


def test_a_stack_without_kafka_authentication_gets_a_plaintext_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_auth, "KAFKA_AUTH", False)
    secrets.password("kafka-admin")  # left by a stack that once authenticated
    kafka = operator_access.kafka()
    assert (kafka.kafka_security_protocol, kafka.kafka_sasl_username) == ("PLAINTEXT", None)
