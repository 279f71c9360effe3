"""How an order takes its products' units: the strategies and the ``auto`` rule.

- ``check_then_pay``: validation checks the units without locking; the allocation, after the
  payment, takes them under a lock, and refunds the payment when another saga took them first.
- ``reserve_then_pay``: validation holds the units for the saga (a reservation with a deadline)
  before pagos is asked to charge; the payment's success turns the reservation into an
  allocation, which no other saga can have taken meanwhile.
- ``auto``: reserves while the product's in-flight demand approaches what is available.

An order is validated with one strategy: it reserves when any of its lines' products does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class AllocationStrategy(StrEnum):
    CHECK_THEN_PAY = "check_then_pay"
    RESERVE_THEN_PAY = "reserve_then_pay"
    AUTO = "auto"


@dataclass(frozen=True)
class Demand:
    """A line's product as the ``auto`` rule sees it."""

    sku: str
    requested: int
    available: int
    """Units on hand less the live reservations of other sagas."""
    in_flight: int
    """Units of other orders verified within the reservation TTL and not yet allocated."""


def reserves(demand: Demand, ratio: float) -> bool:
    """The ``auto`` rule: reserve when the units in flight with this order's reach ``ratio`` of
    what is available (0.5: from half of it on). Below that, orders rarely meet at the last
    units and Check-Then-Pay costs no refund; above it, a burst would lose races."""
    return demand.in_flight + demand.requested >= ratio * demand.available


def order_reserves(strategies: Mapping[str, AllocationStrategy], demands: Iterable[Demand],
                   ratio: float) -> bool:
    """Whether an order reserves: when any line's product is ``reserve_then_pay``, or ``auto``
    and its rule says so. A product absent from ``strategies`` is ``check_then_pay``."""
    for demand in demands:
        strategy = strategies.get(demand.sku, AllocationStrategy.CHECK_THEN_PAY)
        if strategy is AllocationStrategy.RESERVE_THEN_PAY:
            return True
        if strategy is AllocationStrategy.AUTO and reserves(demand, ratio):
            return True
    return False
