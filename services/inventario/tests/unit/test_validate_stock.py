"""validate_stock: OrdenSolicitada → StockVerificado | StockNoDisponible, the check recorded with
the commit (a verified one with the payment it asks pagos for), no stock taken; nothing checked
for a saga cancelled first."""

from __future__ import annotations

from decimal import Decimal

import pytest

from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line
from inventario.usecases.validate_stock import validate_stock

from .events import PAYMENT_METHOD, handling, orden_solicitada
from .fakes import Allocation, FakeStockRepository, Inventory, StagingUnitOfWork, StockCheck


async def _validate(inventory: Inventory, *items: tuple[str, int], saga_id: str | None = None
                    ) -> tuple[StagingUnitOfWork, str, str]:
    event = orden_solicitada(*items, saga_id=saga_id)
    uow = StagingUnitOfWork()
    with handling(event):
        await validate_stock(uow, FakeStockRepository(inventory, uow), event)
    return uow, event.saga_id, event.payload.order_id


async def test_stock_on_hand_is_verified_with_the_lines_merged_and_nothing_taken() -> None:
    inventory = Inventory()
    inventory.put("A", 5)
    inventory.put("B", 1)
    uow, saga_id, order_id = await _validate(inventory, ("B", 1), ("A", 2), ("A", 3))

    assert uow.commits == 1 and uow.committed
    [event] = uow.emitted
    assert event.event_type == "StockVerificado" and event.saga_id == saga_id
    assert event.payload == {"order_id": order_id,
                             "items": [{"sku": "A", "quantity": 5}, {"sku": "B", "quantity": 1}],
                             "total_amount": "12.50", "currency": "EUR",
                             "payment_method": PAYMENT_METHOD}
    assert inventory.checks == {saga_id: StockCheck(order_id, [Line("A", 5), Line("B", 1)],
                                                    "verified", Money(Decimal("12.50"), "EUR"))}
    assert inventory.products == {"A": 5, "B": 1}
    assert inventory.allocations == {}


async def test_too_few_units_or_an_unknown_product_make_the_stock_unavailable() -> None:
    inventory = Inventory()
    inventory.put("A", 2)
    inventory.put("B", 9)
    uow, saga_id, order_id = await _validate(inventory, ("A", 3), ("B", 1), ("Z", 1))

    assert uow.committed
    assert uow.emitted_types == ["StockNoDisponible"]
    assert uow.emitted[0].payload == {
        "order_id": order_id, "reason": "stock insuficiente",
        "unavailable": [{"sku": "A", "requested": 3, "available": 2},
                        {"sku": "Z", "requested": 1, "available": 0}]}
    assert inventory.checks[saga_id] == StockCheck(
        order_id, [Line("A", 3), Line("B", 1), Line("Z", 1)], "unavailable", None)
    assert inventory.products == {"A": 2, "B": 9}


@pytest.mark.parametrize("status", [AllocationStatus.BLOCKED, AllocationStatus.RELEASED])
async def test_a_saga_with_an_allocation_is_not_checked(status: AllocationStatus) -> None:
    """Its order was cancelled before its check (BLOCKED), or the request comes again after
    the saga went on: nothing left to check."""
    inventory = Inventory()
    inventory.put("A", 5)
    inventory.allocations["saga-1"] = Allocation(None, status, [])
    uow, _, _ = await _validate(inventory, ("A", 1), saga_id="saga-1")

    assert uow.commits == 1 and uow.committed  # the message is recorded as processed
    assert uow.emitted == []
    assert inventory.checks == {}
