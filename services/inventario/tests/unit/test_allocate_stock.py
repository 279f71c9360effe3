"""allocate_stock: PagoExitoso → StockAsignado | FalloAsignacion, decided on a read without locks
and written only if the commit's guard finds the units and the saga as they were read; else
nothing is written and the message is handled again on what is there then."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from inventario.domain.stock import AllocationStatus, Line
from inventario.usecases.allocate_stock import allocate_stock
from sagakit.errors import PermanentError

from .events import handling, pago_exitoso
from .fakes import Allocation, FakeStockRepository, Inventory, StagingUnitOfWork, StockCheck

ORDER_ID = "6f1c2a4e-1111-4222-8333-444455556666"
LOCK_TIMEOUT_MS = 1234


def _checked(inventory: Inventory, saga_id: str, *lines: Line) -> None:
    inventory.checks[saga_id] = StockCheck(ORDER_ID, list(lines), "verified")


async def _allocate(inventory: Inventory, saga_id: str, *,
                    meanwhile: Callable[[Inventory], None] | None = None
                    ) -> tuple[StagingUnitOfWork, FakeStockRepository]:
    event = pago_exitoso(saga_id, ORDER_ID)
    uow = StagingUnitOfWork()
    stock = FakeStockRepository(inventory, uow, meanwhile=meanwhile)
    with handling(event):
        await allocate_stock(uow, stock, event, lock_timeout_ms=LOCK_TIMEOUT_MS)
    return uow, stock


async def test_the_checked_lines_units_are_taken_and_the_allocation_recorded() -> None:
    inventory = Inventory()
    inventory.put("A", 10)
    inventory.put("B", 5)
    _checked(inventory, "saga-1", Line("A", 3), Line("B", 5))
    uow, stock = await _allocate(inventory, "saga-1")

    assert uow.commits == 1 and uow.committed
    [event] = uow.emitted
    assert event.event_type == "StockAsignado" and event.saga_id == "saga-1"
    assert event.payload == {"order_id": ORDER_ID, "items": [{"sku": "A", "quantity": 3},
                                                             {"sku": "B", "quantity": 5}]}
    assert inventory.products == {"A": 7, "B": 0}
    assert inventory.allocations == {"saga-1": Allocation(
        ORDER_ID, AllocationStatus.ALLOCATED, [Line("A", 3), Line("B", 5)])}
    assert stock.lock_timeouts_ms == [LOCK_TIMEOUT_MS]


async def test_stock_consumed_since_the_check_fails_the_allocation_and_takes_nothing() -> None:
    inventory = Inventory()
    inventory.put("A", 2)
    _checked(inventory, "saga-1", Line("A", 3), Line("Z", 1))
    uow, _ = await _allocate(inventory, "saga-1")

    assert uow.committed
    assert uow.emitted_types == ["FalloAsignacion"]
    assert uow.emitted[0].payload == {
        "order_id": ORDER_ID, "reason": "race condition: stock consumed after validation",
        "unavailable": [{"sku": "A", "requested": 3, "available": 2},
                        {"sku": "Z", "requested": 1, "available": 0}]}
    assert inventory.products == {"A": 2}
    assert inventory.allocations["saga-1"] == Allocation(
        ORDER_ID, AllocationStatus.FAILED, [Line("A", 3), Line("Z", 1)])


@pytest.mark.parametrize("status", list(AllocationStatus))
async def test_a_saga_with_an_allocation_already_is_left_alone(status: AllocationStatus) -> None:
    """A PagoExitoso delivered again, or one that comes after the order was cancelled."""
    inventory = Inventory()
    inventory.put("A", 5)
    _checked(inventory, "saga-1", Line("A", 1))
    before = Allocation(ORDER_ID, status, [Line("A", 1)])
    inventory.allocations["saga-1"] = before
    uow, stock = await _allocate(inventory, "saga-1")

    assert uow.commits == 1 and uow.committed  # the message is recorded as processed
    assert uow.emitted == [] and uow.staged is None
    assert inventory.products == {"A": 5} and inventory.allocations == {"saga-1": before}
    assert stock.lock_timeouts_ms == []


async def test_a_payment_for_a_saga_never_checked_is_refused_for_good() -> None:
    inventory = Inventory()
    inventory.put("A", 5)
    with pytest.raises(PermanentError, match="no stock validation recorded for saga saga-1"):
        await _allocate(inventory, "saga-1")
    assert inventory.products == {"A": 5} and inventory.allocations == {}


async def test_units_taken_between_the_read_and_the_lock_write_nothing_then_fail_it() -> None:
    """Another saga takes the last unit after the read: the guard finds the units disagree
    with ALLOCATED, nothing is written, and handled again the payment fails the allocation."""
    inventory = Inventory()
    inventory.put("A", 1)
    _checked(inventory, "saga-1", Line("A", 1))

    def another_saga_takes_it(inv: Inventory) -> None:
        inv.put("A", 0)
    uow, _ = await _allocate(inventory, "saga-1", meanwhile=another_saga_takes_it)

    assert uow.commits == 1 and not uow.committed
    assert uow.emitted == []
    assert inventory.allocations == {} and inventory.products == {"A": 0}

    again, _ = await _allocate(inventory, "saga-1")
    assert again.committed and again.emitted_types == ["FalloAsignacion"]
    assert inventory.allocations["saga-1"].status is AllocationStatus.FAILED


async def test_units_put_back_between_the_read_and_the_lock_write_nothing_then_allocate() -> None:
    """Decided FAILED on too few units; a release puts them back before the lock: the guard
    finds the units disagree with FAILED, and handled again the payment allocates."""
    inventory = Inventory()
    inventory.put("A", 0)
    _checked(inventory, "saga-1", Line("A", 2))

    def another_saga_releases(inv: Inventory) -> None:
        inv.put("A", 2)
    uow, _ = await _allocate(inventory, "saga-1", meanwhile=another_saga_releases)

    assert not uow.committed and uow.emitted == []
    assert inventory.allocations == {} and inventory.products == {"A": 2}

    again, _ = await _allocate(inventory, "saga-1")
    assert again.committed and again.emitted_types == ["StockAsignado"]
    assert inventory.products == {"A": 0}


async def test_a_cancellation_recorded_between_the_read_and_the_lock_wins() -> None:
    """OrdenCancelada blocks the saga after the read: the guard finds its allocation, nothing
    is taken, and handled again the payment is left alone."""
    inventory = Inventory()
    inventory.put("A", 3)
    _checked(inventory, "saga-1", Line("A", 1))
    blocked = Allocation(ORDER_ID, AllocationStatus.BLOCKED, [])

    def cancelled(inv: Inventory) -> None:
        inv.allocations["saga-1"] = blocked
    uow, _ = await _allocate(inventory, "saga-1", meanwhile=cancelled)

    assert not uow.committed and uow.emitted == []
    assert inventory.products == {"A": 3} and inventory.allocations == {"saga-1": blocked}

    again, _ = await _allocate(inventory, "saga-1")
    assert again.committed and again.emitted == []
    assert inventory.products == {"A": 3}
