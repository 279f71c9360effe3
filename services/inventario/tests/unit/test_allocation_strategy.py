"""The ``auto`` rule and an order's strategy (inventario.domain.allocation_strategy)."""

from __future__ import annotations

import pytest

from inventario.domain.allocation_strategy import (
    AllocationStrategy,
    Demand,
    order_reserves,
    reserves,
)

S = AllocationStrategy


@pytest.mark.parametrize(("in_flight", "requested", "available", "ratio", "expected"), [
    (0, 1, 10, 0.5, False),
    (3, 1, 10, 0.5, False),
    (4, 1, 10, 0.5, True),    # 5 of 10: half reached
    (0, 3, 4, 0.5, True),     # a big order for a small stock
    (0, 1, 0, 0.5, True),     # nothing available: reserving costs nothing, refunds nothing
    (5, 1, 10, 1.0, False),
    (9, 1, 10, 1.0, True),
])
def test_auto_reserves_when_demand_in_flight_reaches_its_share_of_the_stock(
        in_flight: int, requested: int, available: int, ratio: float, expected: bool) -> None:
    assert reserves(Demand("A", requested, available, in_flight), ratio) is expected


def test_an_order_reserves_when_any_line_does() -> None:
    calm = Demand("A", 1, 100, 0)
    busy = Demand("B", 1, 2, 1)
    assert not order_reserves({"A": S.AUTO, "B": S.CHECK_THEN_PAY}, [calm, busy], 0.5)
    assert order_reserves({"A": S.AUTO, "B": S.AUTO}, [calm, busy], 0.5)
    assert order_reserves({"A": S.RESERVE_THEN_PAY}, [calm], 0.5)
    assert not order_reserves({}, [busy], 0.5)  # unknown: check_then_pay
