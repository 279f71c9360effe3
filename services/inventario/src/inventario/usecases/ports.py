"""What inventario's use cases ask of their stores, in the terms of stock and allocations.

The use cases depend on these protocols and on ``sagakit.ports.UnitOfWorkPort``;
``inventario.adapters.stock_repository`` implements them on PostgreSQL, bound to the unit of
work, and the unit tests on memory (``services/inventario/tests/unit/fakes.py``). A write said
to be *recorded with the commit* takes effect only when the unit of work commits, and with
everything else it commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line
from saga_contracts.events.base import Event


@dataclass(frozen=True)
class RecordedCheck:
    """A stock check recorded for the saga: its result and the answer it sent."""

    result: str
    answer: Event | None
    """The event it answered with (None: recorded before answers were kept)."""


@dataclass(frozen=True)
class ValidationRead:
    """What a validation decides on, read without locks."""

    allocation: AllocationStatus | None
    """The saga's allocation (None: it has none)."""
    on_hand: dict[str, int]
    """Units on hand of the products asked about (absent products left out)."""
    prices: dict[str, Money]
    """Catalog prices of those products (products without a price left out)."""
    check: RecordedCheck | None = None
    """The saga's stock check, if one was recorded: the saga was checked already."""


@dataclass(frozen=True)
class AllocationState:
    """What an allocation decides on, read without locks (``StockStore.record_allocation``
    checks it again when it writes)."""

    checked: list[Line] | None
    """The lines validated for the saga (None: it was never validated)."""
    payment_requested: Money | None
    """The payment the saga's stock check asked pagos for (None: none was asked, as the
    check did not verify the stock or never happened). Written once with the check, never
    changed: it cannot go stale between the read and the commit."""
    allocation: AllocationStatus | None
    """The saga's allocation (None: it has none yet)."""
    on_hand: dict[str, int]
    """Units on hand of the lines' products; empty if the saga has an allocation (absent
    products are left out)."""


@dataclass(frozen=True)
class ProductStock:
    sku: str
    quantity: int
    updated_at: datetime
    price: Money | None = None
    """Its catalog price (None: it has none, and no order for it is charged)."""


class StockStore(Protocol):
    """Units on hand and each saga's stock check and allocation: what the saga steps read and
    write."""

    async def validation_read(self, saga_id: str, skus: list[str]) -> ValidationRead:
        """The saga's allocation, its recorded stock check, and the units on hand and catalog
        prices of ``skus``, without locks."""
        ...

    def record_check(self, saga_id: str, order_id: str, lines: list[Line], result: str,
                     payment_requested: Money | None, answer: Event) -> None:
        """Records the saga's stock check (its lines, result, the payment it asks for, if any,
        and the event it answers with) with the commit. Guarded: when a check was recorded for
        the saga meanwhile, nothing of the unit of work is written and its ``commit`` returns
        False (the first check is kept, and its answer is the saga's)."""
        ...

    async def allocation_state(self, saga_id: str, *, statement_timeout_ms: int
                               ) -> AllocationState:
        """The lines checked for the saga, the payment its check asked for, its allocation
        and, if it has none, the lines' units on hand, without locks. The statements after it
        in the unit of work's transaction (the allocation's commit, which waits for the
        products' locks) may take ``statement_timeout_ms`` each: a statement's timeout is fixed
        as it starts, so the one before it sets it."""
        ...

    def record_allocation(self, saga_id: str, order_id: str, status: AllocationStatus,
                          lines: list[Line], *, lock_timeout_ms: int) -> None:
        """Records the saga's allocation with the commit: ``ALLOCATED`` takes the lines' units
        off their products, ``FAILED`` takes nothing. Guarded: written only if the products'
        units, locked, still agree with ``status`` (every line has its units for
        ``ALLOCATED``, some line has too few for ``FAILED``) and no allocation was recorded
        for the saga meanwhile; otherwise nothing of the unit of work is written and its
        ``commit`` returns False. A product's lock waited for longer than
        ``lock_timeout_ms`` fails the commit with a transient error."""
        ...

    async def lock_allocation(self, saga_id: str) -> tuple[AllocationStatus, list[Line]] | None:
        """The saga's allocation and its lines (None: it has none), locked until the commit."""
        ...

    async def block(self, saga_id: str, order_id: str) -> bool:
        """Records that the saga must never be allocated (``BLOCKED``, no lines); False when
        another transaction recorded its allocation first (nothing written)."""
        ...

    async def release(self, saga_id: str, lines: list[Line]) -> None:
        """Puts ``lines``' units back (a product deleted meanwhile comes back with them) and
        marks the saga's allocation, locked by ``lock_allocation``, ``RELEASED``."""
        ...


class ProductStore(Protocol):
    """The catalogue's units on hand and prices, as the stock administration sets them."""

    async def set_product(self, sku: str, quantity: int, price: Money | None) -> None:
        """Sets the product's units on hand and, unless ``price`` is None, its catalog price,
        creating the product if needed (without a price, if none is given)."""
        ...

    async def product(self, sku: str) -> ProductStock | None:
        ...
