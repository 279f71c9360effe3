"""The invariant checker catches each kind of violation: a silent checker cannot pass."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from chaos.checker import (
    Order,
    Payment,
    Reservation,
    Reservations,
    Snapshot,
    check,
    no_manual_refund,
)


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


def cancelled_after_its_charge_failed() -> Snapshot:
    """The healthy run and s4, whose three charge calls the proxy answered (CHARGE_FAILED), then
    cancelled by its customer: pagos replays the charge under the charge's key to find out
    whether it was made; the proxy answered the first replay too, and the gateway declined the
    second (no charge was made). pagos logs the replays as "resolve" attempts."""
    s = healthy()
    s.orders["o4"] = Order("o4", "s4", "CANCELADA_POR_USUARIO", Decimal("3.00"),
                           [{"sku": "SKU-A", "quantity": 1}])
    s.acknowledged.append("o4")
    s.payments["s4"] = Payment("CANCELLED", None, False, [
        *({"kind": "charge", "outcome": "unavailable"} for _ in range(3)),
        {"kind": "resolve", "outcome": "unavailable"},
        {"kind": "resolve", "outcome": "declined"}])
    s.garbled += ["charge-s4"] * 4
    return s


def test_a_garbled_replay_of_a_cancelled_charge_is_recorded_as_its_resolve() -> None:
    assert check(cancelled_after_its_charge_failed()) == []


def test_a_garbled_replay_never_recorded_is_caught() -> None:
    s = cancelled_after_its_charge_failed()
    s.payments["s4"].attempts.pop(3)
    assert [(v.invariant, v.sagas) for v in check(s)] == [("recorded", ("s4",))]


def test_a_replay_whose_answer_was_understood_does_not_stand_for_a_garbled_one() -> None:
    s = cancelled_after_its_charge_failed()
    s.payments["s4"].attempts[3]["outcome"] = "approved"
    assert [(v.invariant, v.sagas) for v in check(s)] == [("recorded", ("s4",))]


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


AT = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)


def reserved() -> Snapshot:
    """The healthy run under reserve_then_pay: s1 reserved 2 units and confirmed them when its
    payment came (allocated), s2's reservation expired before its payment came, which then
    lost the race (refunded), s4 holds 3 units of an order still under way at the snapshot,
    s3's reservation was released by its cancellation."""
    s = healthy()
    s.orders["o4"] = Order("o4", "s4", "PENDIENTE_PAGO", Decimal("9.00"),
                           [{"sku": "SKU-A", "quantity": 3}])
    s.reservations = Reservations(
        checked=True, at=AT,
        rows=[Reservation("s1", "SKU-A", 2, "CONFIRMED", AT - timedelta(seconds=60)),
              Reservation("s2", "SKU-A", 1, "EXPIRED", AT - timedelta(seconds=30)),
              Reservation("s3", "SKU-A", 1, "RELEASED", AT + timedelta(seconds=90)),
              Reservation("s4", "SKU-A", 3, "RESERVED", AT + timedelta(seconds=100))],
        payment_taken_at={"s1": AT - timedelta(seconds=150),
                          "s2": AT - timedelta(seconds=10)},
        payment_deadline={"s1": AT - timedelta(seconds=90), "s2": AT - timedelta(seconds=60),
                          "s4": AT + timedelta(seconds=70)},
        cancellation_taken_at={"s3": AT - timedelta(seconds=20)})
    return s


def _reservation_broken(mutate) -> list[str]:  # type: ignore[no-untyped-def]
    s = copy.deepcopy(reserved())
    mutate(s)
    return sorted({str(v) for v in check(s) if v.invariant == "reservations"})


def test_a_healthy_run_with_reservations_keeps_the_reservation_invariants() -> None:
    assert _reservation_broken(lambda s: None) == []


def test_on_a_stack_without_reservations_they_hold_vacuously() -> None:
    s = healthy()
    assert not s.reservations.checked and check(s) == []


def _rows(s: Snapshot, *rows: Reservation) -> None:
    s.reservations.rows += list(rows)


@pytest.mark.parametrize(("name", "mutate", "caught"), [
    ("live reservations hold more than is on hand",
     lambda s: _rows(s, Reservation("s5", "SKU-A", 6, "RESERVED", AT + timedelta(seconds=5))),
     "SKU-A: 9 units held by live reservations, 8 on hand"),
    ("confirmed without its allocation",
     lambda s: s.allocations.pop("s1"), "reservation of SKU-A CONFIRMED, the allocation missing"),
    ("confirmed for other units than allocated",
     lambda s: _rows(s, Reservation("s1", "SKU-B", 1, "CONFIRMED", AT)),
     "reservation of 1 SKU-B CONFIRMED, 0 allocated"),
    ("a payment taken while reserved lost the race",
     lambda s: s.reservations.payment_taken_at.update({"s2": AT - timedelta(seconds=40)}),
     "allocation FAILED for a payment taken at"),
    ("an ended saga still holds units",
     lambda s: setattr(s.orders["o4"], "status", "CANCELADA_POR_USUARIO"),
     "3 SKU-A still RESERVED by a saga that ended"),
    ("a payment step due after its reservation (a payment in time could lose the race)",
     lambda s: s.reservations.payment_deadline.update({"s4": AT + timedelta(seconds=120)}),
     "payment step due 2026-12-06T08:02:00+00:00, after its reservation of SKU-A"),
    ("an allocation took the units of a live reservation and left it EXPIRED",
     lambda s: (s.allocations.update({"s2": ("ALLOCATED", [{"sku": "SKU-A", "quantity": 1}])}),
                s.reservations.payment_taken_at.update({"s2": AT - timedelta(seconds=40)})),
     "reservation of SKU-A EXPIRED, its units allocated"),
    ("a reservation taken after its saga's cancellation, judged after it expired",
     lambda s: (_rows(s, Reservation("s5", "SKU-A", 2, "EXPIRED", AT - timedelta(seconds=5))),
                s.reservations.cancellation_taken_at.update(
                    {"s5": AT - timedelta(seconds=100)})),
     "2 SKU-A held until 2026-12-06T07:59:55+00:00, after inventario took its saga's "
     "cancellation"),
])
def test_each_reservation_violation_is_caught(name: str, mutate, caught: str) -> None:  # type: ignore[no-untyped-def]
    broken = _reservation_broken(mutate)
    assert len(broken) == 1 and caught in broken[0], (name, broken)


def test_an_expired_reservation_holds_nothing() -> None:
    s = reserved()
    _rows(s, Reservation("s6", "SKU-A", 8, "RESERVED", AT - timedelta(seconds=1)))
    assert [v for v in check(s) if v.invariant == "reservations"] == []
