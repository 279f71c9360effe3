"""What pagos asks of the consumer for each event it handles, pinned: its handlers that change
the payment's money read it under a row lock inside their own transaction (a cancellation must
see whether a charge call may have left, ``charge_sent_at``). StockAsignado's, which only
records the allocation, reads outside one and writes with its guarded commit statement. None
shares a transaction."""

from __future__ import annotations

from typing import Any

from pagos.app import subscriptions


class _Worker:
    """The handlers only close over the worker; none is called here."""

    def kick(self) -> None:
        raise AssertionError("not called when subscriptions are built")

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} is not read when subscriptions are built")


def test_every_handler_runs_in_its_own_transaction() -> None:
    subs = subscriptions(_Worker())  # type: ignore[arg-type]
    assert {s.event_type: (s.reads_outside_transaction, s.shares_transaction, s.isolation_level)
            for s in subs} == {
        "StockVerificado": (False, False, None),
        "StockAsignado": (True, False, None),
        "FalloAsignacion": (False, False, None),
        "OrdenCancelada": (False, False, None),
    }
