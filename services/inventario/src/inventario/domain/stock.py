"""Stock rules, free of infrastructure: what is short, what to lock, what a compensation does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, order=True)
class Line:
    sku: str
    quantity: int


@dataclass(frozen=True)
class Shortage:
    sku: str
    requested: int
    available: int


def merge_lines(lines: Iterable[Line]) -> list[Line]:
    """One line per SKU, sorted by SKU: the fixed order in which rows are locked, so two
    allocations that share products always lock them in the same order and never deadlock."""
    totals: dict[str, int] = {}
    for line in lines:
        totals[line.sku] = totals.get(line.sku, 0) + line.quantity
    return [Line(sku, qty) for sku, qty in sorted(totals.items())]


def shortages(lines: Iterable[Line], on_hand: Mapping[str, int]) -> list[Shortage]:
    """Lines whose SKU has fewer units than requested; an unknown SKU has none."""
    return [Shortage(line.sku, line.quantity, on_hand.get(line.sku, 0))
            for line in merge_lines(lines) if on_hand.get(line.sku, 0) < line.quantity]


class AllocationStatus(StrEnum):
    ALLOCATED = "ALLOCATED"   # stock decremented for the saga
    FAILED = "FAILED"         # too little stock at allocation: nothing decremented
    RELEASED = "RELEASED"     # was allocated, then put back (compensation)
    BLOCKED = "BLOCKED"       # the order was cancelled before any allocation: never allocate


class AllocationDecision(StrEnum):
    ALLOCATE = "allocate"
    IGNORE = "ignore"


class ReleaseDecision(StrEnum):
    RELEASE = "release"  # put back exactly what was allocated
    BLOCK = "block"      # nothing allocated yet: make sure nothing will be
    IGNORE = "ignore"    # already compensated, or nothing to compensate


def on_payment_succeeded(current: AllocationStatus | None) -> AllocationDecision:
    """Allocate only the first time, and never for a cancelled order."""
    return AllocationDecision.ALLOCATE if current is None else AllocationDecision.IGNORE


def on_order_cancelled(current: AllocationStatus | None) -> ReleaseDecision:
    if current is None:
        return ReleaseDecision.BLOCK
    if current is AllocationStatus.ALLOCATED:
        return ReleaseDecision.RELEASE
    return ReleaseDecision.IGNORE
