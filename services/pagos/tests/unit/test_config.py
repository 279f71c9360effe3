"""pagos reads its retry schedules from the environment as comma-separated seconds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pagos.config import PagosSettings


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
