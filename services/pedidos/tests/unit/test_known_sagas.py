"""KnownSagas: a bounded memory of the sagas this process wrote last."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from pedidos.domain.order import OrderStatus
from pedidos.usecases.known_sagas import KnownSagas
from pedidos.usecases.ports import SagaState


def _row(saga_id: str, status: str) -> SagaState:
    now = datetime.now(UTC)
    return SagaState(saga_id, "o", "c", OrderStatus(status), Decimal("1.00"), "USD", now, now,
                     None, now, now)


def test_known_sagas_keeps_the_most_recent_and_drops_terminal_ones() -> None:
    known = KnownSagas(capacity=2)
    rows = {name: _row(name, "PENDIENTE_PAGO") for name in ("a", "b", "c")}
    known.remember(rows["a"])
    known.remember(rows["b"])
    known.remember(rows["a"])  # a is now the most recent
    known.remember(rows["c"])
    assert (known.get("a"), known.get("b"), known.get("c")) == (rows["a"], None, rows["c"])
    known.remember(_row("a", "COMPLETADA"))
    assert known.get("a") is None and len(known) == 1
