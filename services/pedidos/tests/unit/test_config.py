"""pedidos' deadlines are checked against the standard's minimums (ADR 0001 for allocation)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from pedidos.config import PaymentTokenSealing, PedidosSettings
from saga_contracts import sealing
from sagakit.settings import InvalidConfiguration, load


def test_defaults_are_part_ii_section_5_4() -> None:
    s = PedidosSettings()
    assert (s.validation_timeout_s, s.payment_timeout_s, s.allocation_timeout_s,
            s.saga_timeout_s) == (30, 60, 15, 7200)


@pytest.mark.parametrize(("var", "value"), [("PEDIDOS_PAYMENT_TIMEOUT_S", "29"),
                                            ("PEDIDOS_ALLOCATION_TIMEOUT_S", "14"),
                                            ("PEDIDOS_SAGA_TIMEOUT_S", "3599")])
def test_below_the_minimum_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                          var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ValidationError) as err:
        PedidosSettings()
    assert var in str(err.value)


def test_tests_may_go_lower_explicitly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEDIDOS_PAYMENT_TIMEOUT_S", "1")
    monkeypatch.setenv("SAGA_ALLOW_UNSAFE_LIMITS", "1")
    assert PedidosSettings().payment_timeout_s == 1


# ------------------------------------------------------------------ the payment token's key


def test_the_sealing_key_is_read_from_the_variable_or_its_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _, public = sealing.new_key_pair("k1")
    monkeypatch.setenv("PEDIDOS_PAYMENT_TOKEN_SEAL_KEY", public)
    assert load(PaymentTokenSealing).sealing_key() == sealing.parse_sealing_key(public)
    monkeypatch.delenv("PEDIDOS_PAYMENT_TOKEN_SEAL_KEY")
    (tmp_path / "seal.pub").write_text(public + "\n")
    monkeypatch.setenv("PEDIDOS_PAYMENT_TOKEN_SEAL_KEY_FILE", str(tmp_path / "seal.pub"))
    assert load(PaymentTokenSealing).sealing_key().key_id == "k1"


@pytest.mark.parametrize(("env", "named"), [
    ({}, "PEDIDOS_PAYMENT_TOKEN_SEAL_KEY (or PEDIDOS_PAYMENT_TOKEN_SEAL_KEY_FILE) is not set"),
    ({"PEDIDOS_PAYMENT_TOKEN_SEAL_KEY": "k1:not-a-key"}, "PEDIDOS_PAYMENT_TOKEN_SEAL_KEY:"),
    ({"PEDIDOS_PAYMENT_TOKEN_SEAL_KEY": "x", "PEDIDOS_PAYMENT_TOKEN_SEAL_KEY_FILE": "/x"},
     "both set"),
    ({"PEDIDOS_PAYMENT_TOKEN_SEAL_KEY_FILE": "/nonexistent/seal.pub"}, "cannot read"),
])
def test_without_a_usable_sealing_key_pedidos_does_not_start(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(InvalidConfiguration, match=re.escape(named)) as err:
        load(PaymentTokenSealing).sealing_key()
    assert "not-a-key" not in str(err.value)
