"""pagos reads its retry schedules from the environment as comma-separated seconds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from pagos.config import GatewaySecretKey, PagosSettings, PaymentTokenKeys
from saga_contracts import sealing
from sagakit.settings import InvalidConfiguration, load


def test_defaults_are_the_standards() -> None:
    s = PagosSettings()
    assert s.gateway_timeout_s == 30
    assert s.charge_retry_schedule_s == (2.0, 8.0, 18.0)
    assert len(s.refund_retry_schedule_s) + 1 == 5


def test_schedules_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGOS_CHARGE_RETRY_SCHEDULE_S", "0.5,1,2")
    monkeypatch.setenv("PAGOS_GATEWAY_TIMEOUT_S", "2")
    s = PagosSettings()
    assert s.charge_retry_schedule_s == (0.5, 1.0, 2.0) and s.gateway_timeout_s == 2


def test_a_bad_schedule_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGOS_CHARGE_RETRY_SCHEDULE_S", "2,-1")
    with pytest.raises(ValidationError):
        PagosSettings()


# ------------------------------------------------------------------ the payment token's keys


def test_the_opening_keys_are_read_from_the_variable_or_its_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    old, _ = sealing.new_key_pair("old")
    new, _ = sealing.new_key_pair("new")
    monkeypatch.setenv("PAGOS_PAYMENT_TOKEN_OPEN_KEYS", f"{old},{new}")
    settings = load(PaymentTokenKeys)
    assert settings.opening_keys().key_ids == ("new", "old")
    assert old.split(":")[1] not in repr(settings), "the keys are never shown"
    monkeypatch.delenv("PAGOS_PAYMENT_TOKEN_OPEN_KEYS")
    (tmp_path / "keys").write_text(f"{old}\n{new}\n")
    monkeypatch.setenv("PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE", str(tmp_path / "keys"))
    assert load(PaymentTokenKeys).opening_keys().key_ids == ("new", "old")


@pytest.mark.parametrize(("value", "named"), [
    (None, "PAGOS_PAYMENT_TOKEN_OPEN_KEYS (or PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE) is not set"),
    ("k1:" + "Q" * 20, "PAGOS_PAYMENT_TOKEN_OPEN_KEYS:"),
])
def test_without_usable_opening_keys_pagos_does_not_start(
        monkeypatch: pytest.MonkeyPatch, value: str | None, named: str) -> None:
    if value is not None:
        monkeypatch.setenv("PAGOS_PAYMENT_TOKEN_OPEN_KEYS", value)
    with pytest.raises(InvalidConfiguration, match=re.escape(named)) as err:
        load(PaymentTokenKeys).opening_keys()
    assert "Q" * 20 not in str(err.value), "a key is never quoted"


# ------------------------------------------------------------------ the gateway's secret key


def test_the_gateway_key_is_read_from_the_variable_or_its_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PAGOS_GATEWAY_SECRET_KEY", "sk_test_from-the-variable")
    settings = load(GatewaySecretKey)
    assert settings.secret_key() == "sk_test_from-the-variable"
    assert "from-the-variable" not in repr(settings), "the key is never shown"
    monkeypatch.delenv("PAGOS_GATEWAY_SECRET_KEY")
    (tmp_path / "key").write_text("sk_test_from-the-file\n")
    monkeypatch.setenv("PAGOS_GATEWAY_SECRET_KEY_FILE", str(tmp_path / "key"))
    assert load(GatewaySecretKey).secret_key() == "sk_test_from-the-file"


def test_without_the_gateway_key_pagos_does_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAGOS_GATEWAY_SECRET_KEY", raising=False)
    monkeypatch.delenv("PAGOS_GATEWAY_SECRET_KEY_FILE", raising=False)
    with pytest.raises(InvalidConfiguration, match="PAGOS_GATEWAY_SECRET_KEY"):
        load(GatewaySecretKey).secret_key()
