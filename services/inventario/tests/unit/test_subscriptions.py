"""What inventario asks of the consumer for each event it handles, pinned: a flag flipped by
mistake changes how a saga step commits without any other unit test noticing."""

from __future__ import annotations

import pytest

from inventario.app import subscriptions
from sagakit.settings import InvalidConfiguration


def _flags() -> dict[str, tuple[bool, bool, str | None]]:
    return {s.event_type: (s.reads_outside_transaction, s.shares_transaction, s.isolation_level)
            for s in subscriptions(None)}  # type: ignore[arg-type]  # the runtime is not read


def test_each_handler_commits_as_its_rule_needs() -> None:
    assert _flags() == {
        # A lock-free read, recorded by the commit statement: queued checks may share one
        # transaction (ADR 0006).
        "OrdenSolicitada": (True, True, None),
        # The allocation's guard re-checks under row locks in its one statement (ADR 0005);
        # it takes locks, so it never shares a transaction with other records. Its read and
        # that statement are a transaction, in which the read sets the statement's timeout
        # above the lock timeout: a transaction of its own, the statement would have the
        # connection's, shorter, and the lock timeout would never apply (ADR 0001).
        "PagoExitoso": (False, False, None),
        # A release reads the allocation under its lock inside a transaction of its own.
        "OrdenCancelada": (False, False, None),
    }


def test_the_versions_of_the_order_read_are_a_setting_and_each_commits_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INVENTARIO_READS_ORDEN_SOLICITADA", "OrdenSolicitada_v4")
    assert "OrdenSolicitada" not in _flags()
    assert _flags()["OrdenSolicitada_v4"] == (True, True, None)
    monkeypatch.setenv("INVENTARIO_READS_ORDEN_SOLICITADA", "OrdenSolicitada,OrdenSolicitada_v4")
    flags = _flags()
    assert flags["OrdenSolicitada"] == flags["OrdenSolicitada_v4"] == (True, True, None)
    monkeypatch.setenv("INVENTARIO_READS_ORDEN_SOLICITADA", "OrdenSolicitada_v2")
    with pytest.raises(InvalidConfiguration, match="INVENTARIO_READS_ORDEN_SOLICITADA"):
        _flags()
