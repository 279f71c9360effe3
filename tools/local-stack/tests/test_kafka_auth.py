"""What the local stack gives Kafka and its clients with and without SAGA_KAFKA_AUTH."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from local_stack import kafka_auth, kafka_tls, secrets, settings


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    return tmp_path


@pytest.fixture
def auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_auth, "KAFKA_AUTH", True)


@pytest.fixture
def no_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_auth, "KAFKA_AUTH", False)


def test_authentication_is_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        monkeypatch.delenv("SAGA_KAFKA_AUTH", raising=False)
        assert importlib.reload(settings).KAFKA_AUTH is True
        monkeypatch.setenv("SAGA_KAFKA_AUTH", "0")
        assert importlib.reload(settings).KAFKA_AUTH is False
    finally:
        monkeypatch.undo()
        importlib.reload(settings)


@pytest.mark.usefixtures("no_auth")
def test_without_auth_everything_stays_plaintext_and_no_secret_is_made(_scratch: Path) -> None:
    assert kafka_auth.service_env("pedidos") == {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
                                                 "KAFKA_SECURITY_PROTOCOL": "PLAINTEXT"}
    assert kafka_auth.listeners() == []
    assert kafka_auth.admin_client_settings().kafka_security_protocol == "PLAINTEXT"
    assert kafka_auth.format_arguments() == []
    assert "authorizer" not in kafka_auth.broker_properties(["PROXIED_PEDIDOS"])
    assert not (_scratch / "secrets").exists()


@pytest.mark.usefixtures("auth")
def test_each_service_gets_its_own_principal_and_generated_password() -> None:
    envs = {s: kafka_auth.service_env(s) for s in ("pedidos", "inventario", "pagos")}
    for service, env in envs.items():
        assert env["KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"
        assert env["KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
        assert env["KAFKA_SASL_USERNAME"] == service
        assert env["KAFKA_SASL_PASSWORD"] == secrets.existing(f"kafka-{service}")
    assert len({env["KAFKA_SASL_PASSWORD"] for env in envs.values()}) == 3


@pytest.mark.usefixtures("auth")
def test_the_broker_authenticates_every_listener_and_denies_by_default() -> None:
    props = kafka_auth.broker_properties(["PROXIED_PEDIDOS", "PROXIED_PAGOS"])
    assert "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer" in props
    assert "allow.everyone.if.no.acl.found=false" in props
    assert "super.users=User:admin;User:controller" in props
    for listener in ("client", "proxied_pedidos", "proxied_pagos", "tls"):
        assert f"listener.name.{listener}.scram-sha-512.sasl.jaas.config=" in props
    assert "listener.name.controller.plain.sasl.jaas.config=" in props


@pytest.mark.usefixtures("auth")
def test_storage_is_formatted_with_a_scram_user_per_principal() -> None:
    args = kafka_auth.format_arguments()
    users = [a for a in args if a != "--add-scram"]
    assert args.count("--add-scram") == len(users) == 5
    for principal in ("admin", "pedidos", "inventario", "pagos", "operator"):
        assert (f"SCRAM-SHA-512=[name={principal},password={kafka_auth.password(principal)}]"
                in users)


@pytest.mark.usefixtures("auth")
def test_a_data_directory_formatted_without_users_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="formatted without SASL users"):
        kafka_auth.check_formatted_with_users(tmp_path)
    kafka_auth.formatted(tmp_path)
    kafka_auth.check_formatted_with_users(tmp_path)


def test_no_service_may_write_another_services_topic() -> None:
    writes = {(acl.principal, acl.name) for acl in kafka_auth.acls() if acl.operation == "WRITE"}
    assert ("inventario", "payment-events") not in writes
    assert ("pedidos", "payment-events") not in writes
    assert ("pagos", "payment-events") in writes
    assert all(acl.line().startswith("User:") for acl in kafka_auth.acls())


@pytest.mark.usefixtures("auth")
def test_the_tls_listener_serves_the_stacks_certificate_from_a_pem_keystore() -> None:
    props = kafka_auth.broker_properties([])
    _, keystore = kafka_tls.files()
    assert kafka_auth.listeners() == [("TLS", "SASL_SSL")]
    assert "listener.name.tls.ssl.keystore.type=PEM" in props
    assert f"listener.name.tls.ssl.keystore.location={keystore}" in props


@pytest.mark.usefixtures("auth")
def test_with_tls_a_service_reaches_kafka_over_tls_trusting_the_stacks_ca(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_auth, "KAFKA_TLS", True)
    env = kafka_auth.service_env("pagos")
    assert env["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:9097"
    assert env["KAFKA_SSL_CAFILE"] == str(kafka_tls.ca_file())
    assert env["KAFKA_SASL_USERNAME"] == "pagos"


@pytest.mark.usefixtures("no_auth")
def test_tls_without_authentication_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_auth, "KAFKA_TLS", True)
    with pytest.raises(SystemExit, match="SAGA_KAFKA_TLS=1 needs"):
        kafka_auth.service_env("pagos")
