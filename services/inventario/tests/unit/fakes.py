"""In-memory twins of inventario's stores (``inventario.usecases.ports``), for the use cases'
unit tests.

``Inventory`` holds what the tables hold; ``FakeStockRepository`` is bound to it and to a
``StagingUnitOfWork`` as ``inventario.adapters.stock_repository.StockRepository`` is bound to
the real unit of work. It writes as the adapter does: the stock check and the allocation are
staged and written when the unit of work commits, the allocation only if its guard holds then
(the units of its products agree with its status, and the saga has no allocation yet),
otherwise the commit returns False and nothing is written, events included. The other writes
apply at once, and are undone if the unit of work does not commit (a commit that returns
False, or ``rollback``); other units see them at once, where PostgreSQL's would see them
with the commit (no use case reads what another has not committed).

A change another transaction commits between a use case's read and its write is played with
``meanwhile``: it runs right after the store's first read. A saga's allocation locked by
``lock_allocation`` stays locked until its unit of work ends: another unit's
``lock_allocation`` waits for that, as ``FOR UPDATE`` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from inventario.domain.allocation_strategy import AllocationStrategy, Demand, reserves
from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line, merge_lines
from inventario.usecases.ports import (
    AllocationState,
    ExpiredReservation,
    ProductStock,
    RecordedCheck,
    ValidationRead,
)
from saga_contracts.events.base import Event
from sagakit.fakes import FakeUnitOfWork

_ABSENT = object()


class StagingUnitOfWork(FakeUnitOfWork):
    """``FakeUnitOfWork`` with the one write a store may stage on it, as the real unit of work
    stages it on its commit statement: applied at commit, and a write that returns False (its
    guard found nothing) makes the commit write nothing and return False."""

    def __init__(self, *, commit_result: bool = True) -> None:
        super().__init__("inventario", commit_result=commit_result)
        self.staged: Callable[[], bool] | None = None
        self._before: list[tuple[dict[Any, Any], Any, Any]] = []
        self.ended = asyncio.Event()
        """Set once the unit of work committed or rolled back: the locks it held are free."""

    def stage(self, write: Callable[[], bool]) -> None:
        if self.staged is not None:
            raise RuntimeError("a unit of work stages one write")
        self.staged = write

    def touch(self, table: dict[Any, Any], key: Any) -> None:
        """``table[key]`` is about to be written at once: kept, to be put back on rollback."""
        self._before.append((table, key, table.get(key, _ABSENT)))

    def rollback(self) -> None:
        """Undoes the writes run at once (the unit of work ends without its commit)."""
        for table, key, value in reversed(self._before):
            if value is _ABSENT:
                table.pop(key, None)
            else:
                table[key] = value
        self._before.clear()
        self.ended.set()

    async def commit(self) -> bool:
        if self.commit_result and self.staged is not None and not self.staged():
            self.commit_result = False
        committed = await super().commit()
        if committed:
            self._before.clear()
            self.ended.set()
        else:
            self.rollback()
        return committed


@dataclass(frozen=True)
class StockCheck:
    order_id: str
    lines: list[Line]
    result: str
    payment_requested: Money | None
    answer: Event | None = field(default=None, compare=False)
    """The event the check answered with (what tests compare is the record's other parts)."""
    checked_at: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Reservation:
    quantity: int
    status: str
    expires_at: datetime


@dataclass(frozen=True)
class Allocation:
    order_id: str | None
    status: AllocationStatus
    lines: list[Line]


@dataclass
class Inventory:
    """inventario's tables: products' units on hand and catalog prices, stock checks and
    allocations by saga."""

    products: dict[str, int] = field(default_factory=dict)
    prices: dict[str, Money] = field(default_factory=dict)
    updated_at: dict[str, datetime] = field(default_factory=dict)
    checks: dict[str, StockCheck] = field(default_factory=dict)
    allocations: dict[str, Allocation] = field(default_factory=dict)
    locked: dict[str, StagingUnitOfWork] = field(default_factory=dict)
    """Saga id → the unit of work that locked its allocation (``lock_allocation``)."""
    strategies: dict[str, AllocationStrategy] = field(default_factory=dict)
    reservations: dict[tuple[str, str], Reservation] = field(default_factory=dict)
    """(saga id, SKU) → the saga's reservation of the product's units."""
    frozen_clock: datetime | None = None
    """The database clock, when a test sets it; otherwise the real one."""

    @property
    def clock(self) -> datetime:
        """What the database's ``now()`` says."""
        return self.frozen_clock or datetime.now(UTC)

    def held_by_others(self, sku: str, saga_id: str) -> int:
        """Units of ``sku`` other sagas hold in live reservations."""
        return sum(r.quantity for (saga, held), r in self.reservations.items()
                   if held == sku and saga != saga_id and self.live(r))

    def live(self, reservation: Reservation) -> bool:
        return reservation.status == "RESERVED" and reservation.expires_at > self.clock

    def reservation_live(self, saga_id: str) -> bool:
        return any(saga == saga_id and self.live(r)
                   for (saga, _), r in self.reservations.items())

    def in_flight(self, sku: str, saga_id: str, window_s: float) -> int:
        """Units of ``sku`` of Check-Then-Pay orders in flight: other sagas' verified checks
        within the window, neither allocated nor holding a live reservation."""
        since = self.clock - timedelta(seconds=window_s)
        return sum(line.quantity for saga, check in self.checks.items()
                   if saga != saga_id and check.result == "verified"
                   and check.checked_at is not None and check.checked_at > since
                   and saga not in self.allocations and not self.reservation_live(saga)
                   for line in check.lines if line.sku == sku)

    def available(self, sku: str, saga_id: str) -> int:
        return max(0, self.products.get(sku, 0) - self.held_by_others(sku, saga_id))

    def put(self, sku: str, quantity: int, price: Money | None = None) -> None:
        """Sets the product's units and, unless ``price`` is None, its price."""
        self.products[sku] = quantity
        if price is not None:
            self.prices[sku] = price
        self.updated_at[sku] = datetime.now(UTC)


class FakeStockRepository:
    """``StockStore`` and ``ProductStore`` on an ``Inventory``."""

    def __init__(self, inventory: Inventory, uow: StagingUnitOfWork, *,
                 meanwhile: Callable[[Inventory], None] | None = None) -> None:
        self.inventory = inventory
        self.uow = uow
        self._meanwhile = meanwhile
        self.lock_timeouts_ms: list[int] = []
        """The lock timeout of each allocation staged."""
        self.statement_timeouts_ms: list[int] = []
        """The statement timeout each allocation's read gave the rest of its transaction."""
        self.auto_checks = 0
        """Checks staged to be written under the ``auto`` products' lock."""
        self.confirmed = 0
        """The reservations the allocations committed confirmed."""

    def _read(self) -> None:
        if self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile(self.inventory)

    def _on_hand(self, skus: list[str]) -> dict[str, int]:
        return {sku: self.inventory.products[sku] for sku in skus
                if sku in self.inventory.products}

    # ---- StockStore

    async def validation_read(self, saga_id: str, skus: list[str], *,
                              in_flight_window_s: float = 120.0) -> ValidationRead:
        inv = self.inventory
        allocation = inv.allocations.get(saga_id)
        check = inv.checks.get(saga_id)
        on_hand = self._on_hand(skus)
        strategies = {sku: inv.strategies.get(sku, AllocationStrategy.CHECK_THEN_PAY)
                      for sku in on_hand}
        reserved = {sku: n for sku in on_hand if (n := inv.held_by_others(sku, saga_id))}
        result = ValidationRead(
            allocation.status if allocation else None, on_hand,
            {sku: inv.prices[sku] for sku in skus if sku in inv.prices},
            RecordedCheck(check.result, check.answer) if check else None,
            reserved=reserved, strategies=strategies,
            in_flight={sku: inv.in_flight(sku, saga_id, in_flight_window_s)
                       for sku, strategy in strategies.items()
                       if strategy is AllocationStrategy.AUTO},
            now=inv.clock)
        self._read()
        return result

    def record_check(self, saga_id: str, order_id: str, lines: list[Line], result: str,
                     payment_requested: Money | None, answer: Event) -> None:
        def write() -> bool:
            if saga_id in self.inventory.checks:
                return False  # guarded: a check recorded first is kept, nothing written
            self.inventory.checks[saga_id] = StockCheck(order_id, list(lines), result,
                                                        payment_requested, answer,
                                                        self.inventory.clock)
            return True
        self.uow.stage(write)

    def record_reserving_check(self, saga_id: str, order_id: str, lines: list[Line],
                               payment_requested: Money, answer: Event,
                               expires_at: datetime, *, in_flight_window_s: float = 120.0
                               ) -> None:
        def write() -> bool:
            inv = self.inventory
            wanted = merge_lines(lines)

            def units(sku: str) -> int:
                checked = (inv.in_flight(sku, saga_id, in_flight_window_s)
                           if inv.strategies.get(sku) is AllocationStrategy.AUTO else 0)
                return inv.products.get(sku, 0) - inv.held_by_others(sku, saga_id) - checked
            if saga_id in inv.checks or not all(units(line.sku) >= line.quantity
                                                for line in wanted):
                return False  # guarded: nothing written
            inv.checks[saga_id] = StockCheck(order_id, list(lines), "verified",
                                             payment_requested, answer, inv.clock)
            for line in wanted:
                inv.reservations.setdefault((saga_id, line.sku),
                                            Reservation(line.quantity, "RESERVED", expires_at))
            return True
        self.uow.stage(write)

    def record_auto_check(self, saga_id: str, order_id: str, lines: list[Line],
                          payment_requested: Money, answer: Event, *, ratio: float,
                          in_flight_window_s: float = 120.0) -> None:
        self.auto_checks += 1

        def write() -> bool:
            inv = self.inventory
            if saga_id in inv.checks or any(
                    inv.strategies.get(line.sku) is AllocationStrategy.AUTO and reserves(
                        Demand(line.sku, line.quantity, inv.available(line.sku, saga_id),
                               inv.in_flight(line.sku, saga_id, in_flight_window_s)), ratio)
                    for line in merge_lines(lines)):
                return False  # guarded: nothing written
            inv.checks[saga_id] = StockCheck(order_id, list(lines), "verified",
                                             payment_requested, answer, inv.clock)
            return True
        self.uow.stage(write)

    async def allocation_state(self, saga_id: str, *, statement_timeout_ms: int
                               ) -> AllocationState:
        self.statement_timeouts_ms.append(statement_timeout_ms)
        check = self.inventory.checks.get(saga_id)
        allocation = self.inventory.allocations.get(saga_id)
        state = AllocationState(
            checked=list(check.lines) if check else None,
            payment_requested=check.payment_requested if check else None,
            allocation=allocation.status if allocation else None,
            on_hand=(self._on_hand([line.sku for line in check.lines])
                     if check and allocation is None else {}),
            reserved=({line.sku: n for line in check.lines
                       if (n := self.inventory.held_by_others(line.sku, saga_id))}
                      if check and allocation is None else {}),
            reservation_live=self.inventory.reservation_live(saga_id))
        self._read()
        return state

    def record_allocation(self, saga_id: str, order_id: str, status: AllocationStatus,
                          lines: list[Line], *, lock_timeout_ms: int) -> None:
        self.lock_timeouts_ms.append(lock_timeout_ms)

        def write() -> bool:
            inv = self.inventory
            products = inv.products
            wanted = merge_lines(lines)
            enough = all(products.get(line.sku, 0) - inv.held_by_others(line.sku, saga_id)
                         >= line.quantity for line in wanted)
            agreed = enough == (status is AllocationStatus.ALLOCATED)
            if not agreed or saga_id in inv.allocations:
                return False
            inv.allocations[saga_id] = Allocation(order_id, status, list(lines))
            if status is AllocationStatus.ALLOCATED:
                for line in wanted:
                    inv.put(line.sku, products[line.sku] - line.quantity)
                for key, reservation in list(inv.reservations.items()):
                    if key[0] == saga_id and reservation.status == "RESERVED":
                        inv.reservations[key] = Reservation(reservation.quantity, "CONFIRMED",
                                                            reservation.expires_at)
                        self.confirmed += 1
            return True
        self.uow.stage(write)

    def reservations_confirmed(self) -> int:
        return self.confirmed

    async def lock_allocation(self, saga_id: str) -> tuple[AllocationStatus, list[Line]] | None:
        holder = self.inventory.locked.get(saga_id)
        while holder is not None and holder is not self.uow and not holder.ended.is_set():
            await holder.ended.wait()
            holder = self.inventory.locked.get(saga_id)
        allocation = self.inventory.allocations.get(saga_id)
        if allocation is not None:  # FOR UPDATE locks the row it finds, and only that
            self.inventory.locked[saga_id] = self.uow
        found = (allocation.status, list(allocation.lines)) if allocation else None
        self._read()
        return found

    async def block(self, saga_id: str, order_id: str) -> bool:
        if saga_id in self.inventory.allocations:
            return False
        self.uow.touch(self.inventory.allocations, saga_id)
        self.inventory.allocations[saga_id] = Allocation(order_id, AllocationStatus.BLOCKED, [])
        if saga_id not in self.inventory.checks:
            self.uow.touch(self.inventory.checks, saga_id)
            self.inventory.checks[saga_id] = StockCheck(order_id, [], "cancelled", None)
        return True

    async def release(self, saga_id: str, lines: list[Line]) -> None:
        for line in lines:
            self._put(line.sku, self.inventory.products.get(line.sku, 0) + line.quantity)
        allocation = self.inventory.allocations[saga_id]
        if allocation.status is AllocationStatus.ALLOCATED:
            self.uow.touch(self.inventory.allocations, saga_id)
            self.inventory.allocations[saga_id] = Allocation(
                allocation.order_id, AllocationStatus.RELEASED, allocation.lines)

    async def release_reservation(self, saga_id: str) -> int:
        released = 0
        for key, reservation in list(self.inventory.reservations.items()):
            if key[0] == saga_id and reservation.status == "RESERVED":
                self.uow.touch(self.inventory.reservations, key)
                self.inventory.reservations[key] = Reservation(
                    reservation.quantity, "RELEASED", reservation.expires_at)
                released += 1
        return released

    def _put(self, sku: str, quantity: int, price: Money | None = None) -> None:
        """``Inventory.put``, run at once in the unit of work."""
        for table in (self.inventory.products, self.inventory.prices,
                      self.inventory.updated_at):
            self.uow.touch(table, sku)
        self.inventory.put(sku, quantity, price)

    # ---- ProductStore

    async def set_product(self, sku: str, quantity: int, price: Money | None,
                          strategy: AllocationStrategy | None = None) -> None:
        self._put(sku, quantity, price)
        if strategy is not None:
            self.uow.touch(self.inventory.strategies, sku)
            self.inventory.strategies[sku] = strategy

    async def product(self, sku: str) -> ProductStock | None:
        inv = self.inventory
        if sku not in inv.products:
            return None
        return ProductStock(sku, inv.products[sku], inv.updated_at[sku], inv.prices.get(sku),
                            reserved=inv.held_by_others(sku, ""),
                            allocation_strategy=inv.strategies.get(
                                sku, AllocationStrategy.CHECK_THEN_PAY))

    async def lock_product(self, sku: str) -> ProductStock | None:
        return await self.product(sku)


class FakeReservationDeadlines:
    """``ReservationDeadlines`` on an ``Inventory``."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory

    async def expire_due(self, limit: int) -> list[ExpiredReservation]:
        inv = self.inventory
        due = sorted(((r.expires_at, key) for key, r in inv.reservations.items()
                      if r.status == "RESERVED" and r.expires_at <= inv.clock))[:limit]
        expired = []
        for _, (saga_id, sku) in due:
            reservation = inv.reservations[(saga_id, sku)]
            inv.reservations[(saga_id, sku)] = Reservation(reservation.quantity, "EXPIRED",
                                                           reservation.expires_at)
            expired.append(ExpiredReservation(saga_id, sku, reservation.quantity))
        return expired

    async def seconds_to_next(self) -> float | None:
        inv = self.inventory
        deadlines = [r.expires_at for r in inv.reservations.values() if r.status == "RESERVED"]
        return (min(deadlines) - inv.clock).total_seconds() if deadlines else None
