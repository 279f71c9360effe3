"""Which principal the tests' Kafka clients speak as (saga_harness.config.kafka_fields)."""

from __future__ import annotations

from pathlib import Path

import pytest

from saga_harness import config


@pytest.fixture
def stack_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "kafka-admin").write_text("admin-secret")
    (tmp_path / "secrets" / "kafka-pagos").write_text("pagos-secret")
    monkeypatch.setattr(config, "STATE", tmp_path)
    for name in ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_on_a_stack_without_auth_the_tests_speak_plaintext(
        stack_state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "KAFKA_AUTH", False)
    assert config.kafka_client() == {"bootstrap_servers": config.KAFKA,
                                     "security_protocol": "PLAINTEXT"}


def test_on_a_stack_with_auth_the_tests_are_the_admin(
        stack_state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "KAFKA_AUTH", True)
    client = config.kafka_client()
    assert client["security_protocol"] == "SASL_PLAINTEXT"
    assert client["sasl_plain_username"] == "admin"
    assert client["sasl_plain_password"] == "admin-secret"


def test_a_test_may_speak_as_a_service(stack_state: Path) -> None:
    client = config.kafka_client("pagos")
    assert (client["sasl_plain_username"], client["sasl_plain_password"]) == ("pagos",
                                                                               "pagos-secret")


def test_a_missing_secret_names_the_file(stack_state: Path) -> None:
    with pytest.raises(AssertionError, match="kafka-inventario"):
        config.kafka_client("inventario")
