"""Stock rules and the allocation/compensation decisions, with late and duplicated events."""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from inventario.domain.stock import (
    AllocationDecision,
    AllocationStatus,
    Line,
    ReleaseDecision,
    merge_lines,
    on_order_cancelled,
    on_payment_succeeded,
    shortages,
)


def test_lines_are_merged_and_sorted_into_the_lock_order() -> None:
    lines = [Line("B", 1), Line("A", 2), Line("B", 3)]
    assert merge_lines(lines) == [Line("A", 2), Line("B", 4)]


def test_shortages_count_unknown_products_as_empty() -> None:
    missing = shortages([Line("A", 2), Line("Z", 1)], {"A": 5})
    assert [(s.sku, s.requested, s.available) for s in missing] == [("Z", 1, 0)]


def test_the_same_sku_twice_is_checked_against_the_sum() -> None:
    assert shortages([Line("A", 3), Line("A", 3)], {"A": 5})[0].requested == 6


class AllocationUnderChaos(RuleBasedStateMachine):
    """PagoExitoso and OrdenCancelada of one saga, duplicated and in any order (they travel on
    different topics): stock is allocated at most once, never after a cancellation, and a
    cancelled order keeps no stock."""

    def __init__(self) -> None:
        super().__init__()
        self.status: AllocationStatus | None = None
        self.allocated = 0
        self.released = 0
        self.cancelled = False

    @rule()
    def payment_succeeded(self) -> None:
        if on_payment_succeeded(self.status) is AllocationDecision.ALLOCATE:
            assert not self.cancelled, "allocated for a cancelled order"
            self.status, self.allocated = AllocationStatus.ALLOCATED, self.allocated + 1

    @rule()
    def order_cancelled(self) -> None:
        self.cancelled = True
        decision = on_order_cancelled(self.status)
        if decision is ReleaseDecision.RELEASE:
            self.status, self.released = AllocationStatus.RELEASED, self.released + 1
        elif decision is ReleaseDecision.BLOCK:
            self.status = AllocationStatus.BLOCKED

    @invariant()
    def allocated_at_most_once(self) -> None:
        assert self.allocated <= 1 and self.released <= self.allocated

    @invariant()
    def a_cancelled_order_keeps_no_stock(self) -> None:
        if self.cancelled:
            assert self.allocated - self.released == 0


TestAllocationUnderChaos = AllocationUnderChaos.TestCase
TestAllocationUnderChaos.settings = settings(max_examples=300, stateful_step_count=12,
                                             deadline=None)
