"""Stock rules and the allocation/compensation decisions, with late and duplicated events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
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


EVENTS = st.lists(st.sampled_from(["pago", "cancel"]), min_size=1, max_size=8)


@settings(max_examples=300)
@given(EVENTS)
def test_any_interleaving_allocates_at_most_once_and_never_after_a_cancel(events: list[str]
                                                                          ) -> None:
    status: AllocationStatus | None = None
    allocated = released = 0
    cancelled = False
    for event in events:
        if event == "pago":
            if on_payment_succeeded(status) is AllocationDecision.ALLOCATE:
                assert not cancelled, "allocated for a cancelled order"
                status, allocated = AllocationStatus.ALLOCATED, allocated + 1
        else:
            cancelled = True
            decision = on_order_cancelled(status)
            if decision is ReleaseDecision.RELEASE:
                status, released = AllocationStatus.RELEASED, released + 1
            elif decision is ReleaseDecision.BLOCK:
                status = AllocationStatus.BLOCKED
    assert allocated <= 1 and released <= allocated
    if cancelled:
        assert allocated - released == 0, "a cancelled order keeps no stock"
