"""The invariant checker catches each kind of violation: a silent checker cannot pass."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from chaos.checker import Order, Payment, Snapshot, check, no_manual_refund


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
        payments={"s1": Payment("CAPTURED", "ch1", False,
                                [{"kind": "charge", "outcome": "approved"}]),
                  "s2": Payment("REFUNDED", "ch2", False,
                                [{"kind": "charge", "outcome": "unavailable"},
                                 {"kind": "charge", "outcome": "approved"},
                                 {"kind": "refund", "outcome": "refunded"}])},
        # The first charge call of s2 was answered by a proxy's page, and recorded as unknown.
        garbled=["charge-s2"],
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
    ("refund missing", lambda s: s.refunds.clear(), ["money", "payments"]),
    ("double charge", lambda s: s.charges.append({"id": "ch9", "amount": 600,
                                                  "status": "succeeded",
                                                  "idempotency_key": "charge-s1"}),
     ["money", "payments"]),
    ("refund above the charge", lambda s: s.refunds.append({"id": "re9", "charge": "ch1",
                                                            "amount": 700}),
     ["money", "payments"]),
    ("completed but never charged", lambda s: s.charges.pop(0), ["money", "payments"]),
    ("stuck saga", lambda s: setattr(s.orders["o3"], "status", "PENDIENTE_PAGO"),
     ["terminal"]),
    ("stale outbox", lambda s: s.stale_outbox.append(("pagos", "s2", 900.0)), ["outbox"]),
    ("inbox without effect", lambda s: s.inbox_without_effect.append(("pedidos", "m1")),
     ["inbox"]),
    ("acknowledged order lost", lambda s: s.orders.pop("o3"), ["acknowledged"]),
    ("pagos lost track of a refund",
     lambda s: setattr(s.payments["s2"], "status", "CAPTURED"), ["payments"]),
    ("captured under another charge id",
     lambda s: setattr(s.payments["s1"], "charge_id", "ch7"), ["payments"]),
    ("pagos says declined, the gateway kept the money",
     lambda s: (setattr(s.payments["s1"], "status", "DECLINED"),
                setattr(s.orders["o1"], "status", "CANCELADA_PAGO_RECHAZADO"),
                s.allocations.pop("s1"), s.final_stock.update({"SKU-A": 10})),
     ["money", "payments"]),
    ("gateway work left", lambda s: setattr(s.payments["s2"], "status", "REFUNDING"),
     ["payments"]),
    ("a garbled reply never recorded", lambda s: s.payments["s2"].attempts.pop(0),
     ["recorded"]),
    ("a garbled refund never recorded", lambda s: s.garbled.append("refund-s2"),
     ["recorded"]),
])
def test_each_violation_is_caught(name: str, mutate, caught: list[str]) -> None:  # type: ignore[no-untyped-def]
    assert _broken(mutate) == caught, name


def test_a_manual_refund_is_left_to_the_operators() -> None:
    s = healthy()
    s.orders["o2"].status = "REEMBOLSO_FALLIDO"
    s.payments["s2"].status = "REFUND_FAILED"
    s.refunds.clear()
    assert check(s) == []


def test_a_manual_refund_is_a_violation_when_the_gateway_came_back() -> None:
    s = healthy()
    assert no_manual_refund(s) == []
    s.payments["s2"].status = "REFUND_FAILED"
    s.payments["s2"].manual_refund_required = True
    assert [v.sagas for v in no_manual_refund(s)] == [("s2",)]
    assert "payments" not in {v.invariant for v in check(s)}, "the operators own it"
