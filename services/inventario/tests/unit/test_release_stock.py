"""release_stock: OrdenCancelada puts back what was allocated, once (StockLiberado); a saga not
allocated yet is blocked so a late payment never allocates; anything else is left alone."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from inventario.domain.stock import AllocationStatus, Line
from inventario.usecases.release_stock import release_stock
from saga_harness.events import handling, orden_cancelada
from sagakit.errors import TransientError

from .fakes import Allocation, FakeStockRepository, Inventory, StagingUnitOfWork

ORDER_ID = "6f1c2a4e-1111-4222-8333-444455556666"
REASON = "fallo_asignacion"


def _compensations() -> float:
    return REGISTRY.get_sample_value("saga_compensations_total",
                                     {"service": "inventario", "reason": REASON}) or 0.0


async def _cancel(inventory: Inventory, saga_id: str) -> StagingUnitOfWork:
    event = orden_cancelada(saga_id, ORDER_ID, reason=REASON, status="CANCELADA")
    uow = StagingUnitOfWork()
    with handling(event):
        await release_stock(uow, FakeStockRepository(inventory, uow), event)
    return uow


async def test_allocated_units_are_put_back_once_and_counted_as_a_compensation() -> None:
    inventory = Inventory()
    inventory.put("A", 1)
    lines = [Line("A", 2), Line("B", 3)]  # B was deleted since: it comes back with its units
    inventory.allocations["saga-1"] = Allocation(ORDER_ID, AllocationStatus.ALLOCATED, lines)
    counted = _compensations()
    uow = await _cancel(inventory, "saga-1")

    assert uow.commits == 1 and uow.committed
    [event] = uow.emitted
    assert event.event_type == "StockLiberado" and event.saga_id == "saga-1"
    assert event.payload == {"order_id": ORDER_ID, "items": [{"sku": "A", "quantity": 2},
                                                             {"sku": "B", "quantity": 3}]}
    assert inventory.products == {"A": 3, "B": 3}
    assert inventory.allocations["saga-1"] == Allocation(ORDER_ID, AllocationStatus.RELEASED,
                                                         lines)
    assert _compensations() == counted + 1

    # Delivered again: released already, nothing more is put back.
    again = await _cancel(inventory, "saga-1")
    assert again.committed and again.emitted == []
    assert inventory.products == {"A": 3, "B": 3}
    assert _compensations() == counted + 1


async def test_the_compensation_is_counted_only_once_committed() -> None:
    """Counted after the commit, never for a unit of work that wrote nothing."""
    inventory = Inventory()
    inventory.allocations["saga-1"] = Allocation(ORDER_ID, AllocationStatus.ALLOCATED,
                                                 [Line("A", 1)])
    counted = _compensations()
    event = orden_cancelada("saga-1", ORDER_ID, reason=REASON, status="CANCELADA")
    uow = StagingUnitOfWork(commit_result=False)
    with handling(event):
        await release_stock(uow, FakeStockRepository(inventory, uow), event)
    assert not uow.committed and uow.emitted == []
    assert _compensations() == counted


async def test_a_saga_not_allocated_yet_is_blocked_without_an_event() -> None:
    inventory = Inventory()
    inventory.put("A", 4)
    uow = await _cancel(inventory, "saga-1")

    assert uow.commits == 1 and uow.committed and uow.emitted == []
    assert inventory.allocations == {"saga-1": Allocation(ORDER_ID, AllocationStatus.BLOCKED,
                                                          [])}
    assert inventory.products == {"A": 4}


async def test_an_allocation_recorded_between_the_read_and_the_block_is_retried() -> None:
    """The payment's allocation commits after the cancellation found none: the block writes
    nothing, and the retry finds the allocation and releases it."""
    inventory = Inventory()
    inventory.put("A", 4)
    allocated = Allocation(ORDER_ID, AllocationStatus.ALLOCATED, [Line("A", 1)])

    def allocated_meanwhile(inv: Inventory) -> None:
        inv.allocations["saga-1"] = allocated
        inv.put("A", 3)
    event = orden_cancelada("saga-1", ORDER_ID, reason=REASON, status="CANCELADA")
    uow = StagingUnitOfWork()
    stock = FakeStockRepository(inventory, uow, meanwhile=allocated_meanwhile)
    with handling(event), pytest.raises(TransientError, match="allocation appeared"):
        await release_stock(uow, stock, event)
    assert uow.commits == 0 and uow.emitted == []
    assert inventory.allocations == {"saga-1": allocated}

    again = await _cancel(inventory, "saga-1")
    assert again.committed and again.emitted_types == ["StockLiberado"]
    assert inventory.products == {"A": 4}
    assert inventory.allocations["saga-1"].status is AllocationStatus.RELEASED


@pytest.mark.parametrize("status", [AllocationStatus.FAILED, AllocationStatus.RELEASED,
                                    AllocationStatus.BLOCKED])
async def test_a_saga_with_nothing_allocated_to_put_back_is_left_alone(
        status: AllocationStatus) -> None:
    inventory = Inventory()
    inventory.put("A", 4)
    before = Allocation(ORDER_ID, status, [Line("A", 2)])
    inventory.allocations["saga-1"] = before
    counted = _compensations()
    uow = await _cancel(inventory, "saga-1")

    assert uow.commits == 1 and uow.committed and uow.emitted == []
    assert inventory.allocations == {"saga-1": before} and inventory.products == {"A": 4}
    assert _compensations() == counted
