"""The invariant checker catches each kind of violation: a silent checker cannot pass."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from chaos.checker import Order, Snapshot, check


def healthy() -> Snapshot:
    """Three orders for SKU-A (10 units): one completed, one refunded, one out of stock."""
    orders = {
        "o1": Order("o1", "s1", "COMPLETADA", Decimal("6.00"), [{"sku": "SKU-A", "quantity": 2}]),
        "o2": Order("o2", "s2", "CANCELADA_CON_REEMBOLSO", Decimal("3.00"),
                    [{"sku": "SKU-A", "quantity": 1}]),
        "o3": Order("o3", "s3", "CANCELADA_SIN_STOCK", Decimal("3.00"),
                    [{"sku": "SKU-A", "quantity": 1}]),
    }
    return Snapshot(
        orders=orders, acknowledged=["o1", "o2", "o3"], initial_stock={"SKU-A": 10},
        final_stock={"SKU-A": 8},
        allocations={"s1": ("ALLOCATED", [{"sku": "SKU-A", "quantity": 2}]),
                     "s2": ("FAILED", [{"sku": "SKU-A", "quantity": 1}]),
                     "s3": ("BLOCKED", [])},
        charges=[{"id": "ch1", "amount": 600, "status": "succeeded",
                  "idempotency_key": "charge-s1"},
                 {"id": "ch2", "amount": 300, "status": "succeeded",
                  "idempotency_key": "charge-s2"}],
        refunds=[{"id": "re2", "charge": "ch2", "amount": 300}],
    )


def test_a_healthy_run_has_no_violation() -> None:
    assert check(healthy()) == []


def _broken(mutate) -> list[str]:  # type: ignore[no-untyped-def]
    s = copy.deepcopy(healthy())
    mutate(s)
    return sorted({v.invariant for v in check(s)})


@pytest.mark.parametrize(("name", "mutate", "caught"), [
    ("oversold", lambda s: s.final_stock.update({"SKU-A": 7}), ["no_oversell"]),
    ("negative stock", lambda s: s.final_stock.update({"SKU-A": -1}), ["no_oversell"]),
    ("allocated to a cancelled order",
     lambda s: s.allocations.update({"s2": ("ALLOCATED", [{"sku": "SKU-A", "quantity": 1}])}),
     ["no_oversell"]),
    ("completed without stock", lambda s: s.allocations.update({"s1": ("RELEASED", [])}),
     ["no_oversell"]),
    ("refund missing", lambda s: s.refunds.clear(), ["money"]),
    ("double charge", lambda s: s.charges.append({"id": "ch9", "amount": 600,
                                                  "status": "succeeded",
                                                  "idempotency_key": "charge-s1"}),
     ["money"]),
    ("refund above the charge", lambda s: s.refunds.append({"id": "re9", "charge": "ch1",
                                                            "amount": 700}), ["money"]),
    ("completed but never charged", lambda s: s.charges.pop(0), ["money"]),
    ("stuck saga", lambda s: setattr(s.orders["o3"], "status", "PENDIENTE_PAGO"),
     ["terminal"]),
    ("stale outbox", lambda s: s.stale_outbox.append(("pagos", "s2", 900.0)), ["outbox"]),
    ("inbox without effect", lambda s: s.inbox_without_effect.append(("pedidos", "m1")),
     ["inbox"]),
    ("acknowledged order lost", lambda s: s.orders.pop("o3"), ["acknowledged"]),
])
def test_each_violation_is_caught(name: str, mutate, caught: list[str]) -> None:  # type: ignore[no-untyped-def]
    assert _broken(mutate) == caught, name


def test_a_manual_refund_is_left_to_the_operators() -> None:
    s = healthy()
    s.orders["o2"].status = "REEMBOLSO_FALLIDO"
    s.refunds.clear()
    assert check(s) == []
