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
from datetime import UTC, datetime
from typing import Any

from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line, merge_lines
from inventario.usecases.ports import AllocationState, ProductStock, RecordedCheck, ValidationRead
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

    def _read(self) -> None:
        if self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile(self.inventory)

    def _on_hand(self, skus: list[str]) -> dict[str, int]:
        return {sku: self.inventory.products[sku] for sku in skus
                if sku in self.inventory.products}

    # ---- StockStore

    async def validation_read(self, saga_id: str, skus: list[str]) -> ValidationRead:
        allocation = self.inventory.allocations.get(saga_id)
        check = self.inventory.checks.get(saga_id)
        result = ValidationRead(allocation.status if allocation else None, self._on_hand(skus),
                                {sku: self.inventory.prices[sku] for sku in skus
                                 if sku in self.inventory.prices},
                                RecordedCheck(check.result, check.answer) if check else None)
        self._read()
        return result

    def record_check(self, saga_id: str, order_id: str, lines: list[Line], result: str,
                     payment_requested: Money | None, answer: Event) -> None:
        def write() -> bool:
            if saga_id in self.inventory.checks:
                return False  # guarded: a check recorded first is kept, nothing written
            self.inventory.checks[saga_id] = StockCheck(order_id, list(lines), result,
                                                        payment_requested, answer)
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
                     if check and allocation is None else {}))
        self._read()
        return state

    def record_allocation(self, saga_id: str, order_id: str, status: AllocationStatus,
                          lines: list[Line], *, lock_timeout_ms: int) -> None:
        self.lock_timeouts_ms.append(lock_timeout_ms)

        def write() -> bool:
            products = self.inventory.products
            wanted = merge_lines(lines)
            enough = all(products.get(line.sku, 0) >= line.quantity for line in wanted)
            agreed = enough == (status is AllocationStatus.ALLOCATED)
            if not agreed or saga_id in self.inventory.allocations:
                return False
            self.inventory.allocations[saga_id] = Allocation(order_id, status, list(lines))
            if status is AllocationStatus.ALLOCATED:
                for line in wanted:
                    self.inventory.put(line.sku, products[line.sku] - line.quantity)
            return True
        self.uow.stage(write)

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
        return True

    async def release(self, saga_id: str, lines: list[Line]) -> None:
        for line in lines:
            self._put(line.sku, self.inventory.products.get(line.sku, 0) + line.quantity)
        allocation = self.inventory.allocations[saga_id]
        if allocation.status is AllocationStatus.ALLOCATED:
            self.uow.touch(self.inventory.allocations, saga_id)
            self.inventory.allocations[saga_id] = Allocation(
                allocation.order_id, AllocationStatus.RELEASED, allocation.lines)

    def _put(self, sku: str, quantity: int, price: Money | None = None) -> None:
        """``Inventory.put``, run at once in the unit of work."""
        for table in (self.inventory.products, self.inventory.prices,
                      self.inventory.updated_at):
            self.uow.touch(table, sku)
        self.inventory.put(sku, quantity, price)

    # ---- ProductStore

    async def set_product(self, sku: str, quantity: int, price: Money | None) -> None:
        self._put(sku, quantity, price)

    async def product(self, sku: str) -> ProductStock | None:
        if sku not in self.inventory.products:
            return None
        return ProductStock(sku, self.inventory.products[sku], self.inventory.updated_at[sku],
                            self.inventory.prices.get(sku))
