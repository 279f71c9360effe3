"""What inventario's use cases ask of their stores, in the terms of stock and allocations.

The use cases depend on these protocols and on ``sagakit.ports.UnitOfWorkPort``;
``inventario.adapters.stock_repository`` implements them on PostgreSQL, bound to the unit of
work, and the unit tests on memory (``services/inventario/tests/unit/fakes.py``). A write said
to be *recorded with the commit* takes effect only when the unit of work commits, and with
everything else it commits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from inventario.domain.allocation_strategy import AllocationStrategy
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
    reserved: dict[str, int] = field(default_factory=dict)
    """Units of those products other sagas hold in live reservations (none: left out)."""
    strategies: dict[str, AllocationStrategy] = field(default_factory=dict)
    """The allocation strategy of those products."""
    in_flight: dict[str, int] = field(default_factory=dict)
    """Of the ``auto`` products only: units of Check-Then-Pay orders in flight (other sagas'
    verified checks within the reservation TTL, neither allocated nor holding a live
    reservation)."""
    now: datetime | None = None
    """The database clock at the read: a reservation's deadline counts from it."""

    def available(self) -> dict[str, int]:
        """Units on hand less other sagas' live reservations, never below zero."""
        return {sku: max(0, units - self.reserved.get(sku, 0))
                for sku, units in self.on_hand.items()}

    def reservable(self) -> dict[str, int]:
        """Units a reservation may hold: the available ones less, for an ``auto`` product, those
        of the Check-Then-Pay orders in flight, which are on their way to take them."""
        return {sku: max(0, units - self.in_flight.get(sku, 0))
                for sku, units in self.available().items()}


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
    reserved: dict[str, int] = field(default_factory=dict)
    """Units of those products other sagas hold in live reservations (none: left out)."""
    reservation_live: bool = False
    """The saga holds a live reservation (its deadline is ahead): its units are there."""

    def available(self) -> dict[str, int]:
        """Units on hand less other sagas' live reservations, never below zero."""
        return {sku: max(0, units - self.reserved.get(sku, 0))
                for sku, units in self.on_hand.items()}


@dataclass(frozen=True)
class ProductStock:
    sku: str
    quantity: int
    updated_at: datetime
    price: Money | None = None
    """Its catalog price (None: it has none, and no order for it is charged)."""
    reserved: int = 0
    """Units held by live reservations."""
    allocation_strategy: AllocationStrategy = AllocationStrategy.CHECK_THEN_PAY

    @property
    def available(self) -> int:
        """Units an order can still validate against: on hand less live reservations."""
        return max(0, self.quantity - self.reserved)


class StockStore(Protocol):
    """Units on hand and each saga's stock check and allocation: what the saga steps read and
    write."""

    async def validation_read(self, saga_id: str, skus: list[str], *,
                              in_flight_window_s: float = 120.0) -> ValidationRead:
        """The saga's allocation, its recorded stock check, the database clock, and the units
        on hand, catalog prices, strategies and units held by other sagas of ``skus``, and
        of the ``auto`` ones the units of Check-Then-Pay orders verified within
        ``in_flight_window_s`` and neither allocated nor reserved, without locks."""
        ...

    def record_check(self, saga_id: str, order_id: str, lines: list[Line], result: str,
                     payment_requested: Money | None, answer: Event) -> None:
        """Records the saga's stock check (its lines, result, the payment it asks for, if any,
        and the event it answers with) with the commit. Guarded: when a check was recorded for
        the saga meanwhile, nothing of the unit of work is written and its ``commit`` returns
        False (the first check is kept, and its answer is the saga's)."""
        ...

    def record_reserving_check(self, saga_id: str, order_id: str, lines: list[Line],
                               payment_requested: Money, answer: Event,
                               expires_at: datetime, *, in_flight_window_s: float = 120.0
                               ) -> None:
        """Records a verified stock check with the commit, as ``record_check`` does, and the
        reservation of the lines' units for the saga until ``expires_at``. Guarded: the lines'
        products are locked in SKU order and written only if each still has the line's units
        beside the live reservations of other sagas (and, for an ``auto`` product, beside the
        Check-Then-Pay orders verified within ``in_flight_window_s`` and in flight), and the
        saga has no check; otherwise nothing of the unit of work is written and its
        ``commit`` returns False."""
        ...

    def record_auto_check(self, saga_id: str, order_id: str, lines: list[Line],
                          payment_requested: Money, answer: Event, *, ratio: float,
                          in_flight_window_s: float = 120.0) -> None:
        """Records a verified stock check that reserves nothing for an order with ``auto``
        lines, with the commit. Guarded: the lines' ``auto`` products are locked in SKU order,
        and written only if the ``auto`` rule (``ratio``), asked again on the units held by
        other sagas and of the Check-Then-Pay orders in flight read after the lock, still says
        not to reserve, and the saga has no check; otherwise nothing of the unit of work is
        written and its ``commit`` returns False."""
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
        ``commit`` returns False. A line has its units when its product has them beside the
        live reservations of other sagas. An ``ALLOCATED`` confirms the saga's reservation
        still ``RESERVED`` (``CONFIRMED``), its deadline passed or not. A product's lock waited
        for longer than ``lock_timeout_ms`` fails the commit with a transient error."""
        ...

    def reservations_confirmed(self) -> int:
        """After ``record_allocation``'s commit: how many of the saga's reservations (one per
        product) it confirmed."""
        ...

    async def lock_allocation(self, saga_id: str) -> tuple[AllocationStatus, list[Line]] | None:
        """The saga's allocation and its lines (None: it has none), locked until the commit."""
        ...

    async def block(self, saga_id: str, order_id: str) -> bool:
        """Records that the saga must never be allocated (``BLOCKED``, no lines) and closes
        its stock check if it has none (a check not committed yet then writes nothing, its
        reservation included); False when another transaction recorded its allocation first
        (nothing written)."""
        ...

    async def release(self, saga_id: str, lines: list[Line]) -> None:
        """Puts ``lines``' units back (a product deleted meanwhile comes back with them) and
        marks the saga's allocation, locked by ``lock_allocation``, ``RELEASED``."""
        ...

    async def release_reservation(self, saga_id: str) -> int:
        """Marks the saga's ``RESERVED`` reservations ``RELEASED`` (live or past their
        deadline); how many rows changed: 0 when none was left to release."""
        ...


class ProductStore(Protocol):
    """The catalogue's units on hand and prices, as the stock administration sets them."""

    async def set_product(self, sku: str, quantity: int, price: Money | None,
                          strategy: AllocationStrategy | None = None) -> None:
        """Sets the product's units on hand and, unless None, its catalog price and its
        allocation strategy, creating the product if needed (without a price, and
        ``check_then_pay``, if none is given)."""
        ...

    async def product(self, sku: str) -> ProductStock | None:
        ...

    async def lock_product(self, sku: str) -> ProductStock | None:
        """The product (None: there is none), its row locked until the commit, and the units
        its live reservations hold read after the lock: a reservation committed while the
        lock was waited for counts."""
        ...


@dataclass(frozen=True)
class ExpiredReservation:
    saga_id: str
    sku: str
    quantity: int


class ReservationDeadlines(Protocol):
    """The reservations' deadlines, as the expiry job sees them."""

    async def expire_due(self, limit: int) -> list[ExpiredReservation]:
        """Marks up to ``limit`` ``RESERVED`` reservations past their deadline (database clock)
        ``EXPIRED``, each once whoever else runs it at the same time; those it marked."""
        ...

    async def seconds_to_next(self) -> float | None:
        """Seconds until the earliest live reservation's deadline (None: there is none)."""
        ...
