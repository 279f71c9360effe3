"""The fault plugin wraps the production steps only when a fault setting asks for it: with the
defaults, the consumer's delivery and the relay's acknowledgement step are the production ones
themselves; ``env`` names the plugin beside the faults a test restarts a part with; and no
service's image contains it."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition

from saga_harness import fault_plugin
from saga_harness.fault_plugin import FaultSettings
from sagakit.consumer import Outcome, RawRecord
from sagakit.consumer.delivery import InOrder

TP = TopicPartition("t", 0)


async def _redeliver(raw: RawRecord) -> Outcome:
    raise AssertionError("nothing is delivered again without a fault")


def test_without_fault_settings_nothing_is_wrapped() -> None:
    settings = FaultSettings()
    delivery = InOrder()
    assert fault_plugin.wrap_delivery(delivery, _redeliver, settings) is delivery

    def acked(rows: list[Any]) -> None:
        return None
    assert fault_plugin.wrap_acked(acked, settings) is acked


def test_the_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = fault_plugin.env(crash_after_commit="PagoExitoso", reorder_delivery=0.3)
    assert environment == {"SAGA_PLUGINS": "saga_harness.fault_plugin",
                           "SAGA_FAULT_CRASH_AFTER_COMMIT": "PagoExitoso",
                           "SAGA_FAULT_REORDER_DELIVERY": "0.3"}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings = FaultSettings()
    assert (settings.crash_after_commit, settings.reorder_delivery) == ("PagoExitoso", 0.3)
    with pytest.raises(ValueError, match="no such fault: crash_after_lunch"):
        fault_plugin.env(crash_after_lunch="OrdenSolicitada")


@pytest.fixture
def crashes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``crash_now`` records where it was called instead of killing the test run."""
    points: list[str] = []
    monkeypatch.setattr(fault_plugin, "crash_now", lambda point, event_type: points.append(point))
    return points


async def test_crash_after_commit_kills_after_a_commit_of_its_event_type_only(
        crashes: list[str]) -> None:
    settings = FaultSettings(crash_after_commit="OrdenCompletada")
    delivery = fault_plugin.wrap_delivery(InOrder(), _redeliver, settings)
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
    acked = fault_plugin.wrap_acked(noted.append,
                                    FaultSettings(crash_after_publish="StockVerificado"))
    acked([_Row("PagoExitoso")])
    assert crashes == []
    acked([_Row("PagoExitoso"), _Row("StockVerificado")])
    assert crashes == ["relay: after broker ack, before marking published"]
    assert len(noted) == 2  # (here crash_now returns; the real one never does)


def _installed_with(packages: list[str]) -> set[str]:
    """The packages ``uv sync --no-dev --package ...`` installs for ``packages``, read from
    uv.lock: their dependencies, and theirs, without development groups."""
    lock = tomllib.loads((Path(__file__).resolve().parents[3] / "uv.lock").read_text())
    depends = {p["name"]: [d["name"] for d in p.get("dependencies", [])]
               for p in lock["package"]}
    found: set[str] = set()
    todo = list(packages)
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(depends.get(name, []))
    return found


def test_no_service_image_contains_the_plugin() -> None:
    """deploy/docker/service.Dockerfile installs one service and sagactl: no setting can load
    the fault plugin there, for the package that holds it is not installed."""
    # The reading of the lock finds what it must: the workspace's environment has both.
    assert {"sagakit", "saga-harness"} <= _installed_with(["saga-choreography"])
    for service in ("pedidos", "inventario", "pagos", "consola", "identity-provider",
                    "fake-gateway"):
        installed = _installed_with([service, "sagactl"])
        assert "sagakit" in installed
        assert "saga-harness" not in installed, service
