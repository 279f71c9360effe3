"""Fault injection wraps the production steps only when a fault setting asks for it: with the
defaults, the consumer's delivery and the relay's acknowledgement step are the production ones
themselves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import TopicPartition

from sagakit import faults
from sagakit.consumer import Outcome, RawRecord
from sagakit.consumer.delivery import InOrder
from sagakit.settings import MessagingSettings

TP = TopicPartition("t", 0)


async def _redeliver(raw: RawRecord) -> Outcome:
    raise AssertionError("nothing is delivered again without a fault")


def test_without_fault_settings_nothing_is_wrapped() -> None:
    settings = MessagingSettings()
    delivery = InOrder()
    assert faults.with_delivery_faults(delivery, settings, _redeliver) is delivery

    def acked(rows: list[Any]) -> None:
        return None
    assert faults.with_publish_faults(acked, settings) is acked


@pytest.fixture
def crashes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``crash_now`` records where it was called instead of killing the test run."""
    points: list[str] = []
    monkeypatch.setattr(faults, "crash_now", lambda point, event_type: points.append(point))
    return points


async def test_crash_after_commit_kills_after_a_commit_of_its_event_type_only(
        crashes: list[str]) -> None:
    settings = MessagingSettings(SAGA_FAULT_CRASH_AFTER_COMMIT="OrdenCompletada")
    delivery = faults.with_delivery_faults(InOrder(), settings, _redeliver)
    raw = RawRecord("t", 0, 0, None, None, [])
    await delivery.handled(TP, raw, Outcome("duplicate", [], "OrdenCompletada"))
    await delivery.handled(TP, raw, Outcome("processed", [], "OrdenSolicitada"))
    assert crashes == []
    await delivery.handled(TP, raw, Outcome("processed", [], "OrdenCompletada"))
    assert crashes == ["consumer: after commit, before offset commit"]


@dataclass
class _Row:
    event_type: str


def test_crash_after_publish_kills_before_the_acknowledged_rows_are_noted(
        crashes: list[str]) -> None:
    noted: list[list[_Row]] = []
    acked = faults.with_publish_faults(
        noted.append, MessagingSettings(SAGA_FAULT_CRASH_AFTER_PUBLISH="StockVerificado"))
    acked([_Row("PagoExitoso")])
    assert crashes == []
    acked([_Row("PagoExitoso"), _Row("StockVerificado")])
    assert crashes == ["relay: after broker ack, before marking published"]
    assert len(noted) == 2  # (here crash_now returns; the real one never does)
