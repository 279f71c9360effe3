"""pedidos' deadlines are checked against the standard's minimums (ADR 0001 for allocation)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedidos.config import PedidosSettings


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
