"""set_stock: PUT /products/{sku} sets a product's units on hand and, if given, its catalog price,
creating it if needed, and answers with the product as committed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from inventario.domain.allocation_strategy import AllocationStrategy
from inventario.domain.payment_match import Money
from inventario.usecases.set_stock import BelowReserved, QuantityRequired, set_stock

from .fakes import FakeStockRepository, Inventory, Reservation, StagingUnitOfWork


async def test_an_unknown_product_is_created_with_its_units() -> None:
    inventory = Inventory()
    uow = StagingUnitOfWork()
    product = await set_stock(uow, FakeStockRepository(inventory, uow), "A", 7)

    assert uow.commits == 1 and uow.committed and uow.emitted == []
    assert (product.sku, product.quantity) == ("A", 7)
    assert product.updated_at == inventory.updated_at["A"]
    assert inventory.products == {"A": 7}


async def test_a_known_product_gets_its_new_units_and_the_others_keep_theirs() -> None:
    inventory = Inventory()
    inventory.put("A", 7)
    inventory.put("B", 2)
    uow = StagingUnitOfWork()
    product = await set_stock(uow, FakeStockRepository(inventory, uow), "A", 0)

    assert uow.committed
    assert (product.sku, product.quantity) == ("A", 0)
    assert inventory.products == {"A": 0, "B": 2}


async def test_a_price_given_is_set_and_a_price_left_out_is_kept() -> None:
    inventory = Inventory()
    uow = StagingUnitOfWork()
    repo = FakeStockRepository(inventory, uow)
    priced = await set_stock(uow, repo, "A", 7, Money(Decimal("50.00"), "USD"))
    assert priced.price == Money(Decimal("50.00"), "USD")

    uow = StagingUnitOfWork()
    restocked = await set_stock(uow, FakeStockRepository(inventory, uow), "A", 3)
    assert (restocked.quantity, restocked.price) == (3, Money(Decimal("50.00"), "USD"))
    assert inventory.prices == {"A": Money(Decimal("50.00"), "USD")}


async def test_a_strategy_given_is_set_and_one_left_out_is_kept() -> None:
    inventory = Inventory()
    uow = StagingUnitOfWork()
    repo = FakeStockRepository(inventory, uow)
    created = await set_stock(uow, repo, "A", 3)
    assert created.allocation_strategy is AllocationStrategy.CHECK_THEN_PAY
    uow = StagingUnitOfWork()
    await set_stock(uow, FakeStockRepository(inventory, uow), "A", 3,
                    strategy=AllocationStrategy.RESERVE_THEN_PAY)
    uow = StagingUnitOfWork()
    kept = await set_stock(uow, FakeStockRepository(inventory, uow), "A", 4)
    assert kept.allocation_strategy is AllocationStrategy.RESERVE_THEN_PAY
    assert (kept.quantity, kept.reserved, kept.available) == (4, 0, 4)


async def test_a_quantity_below_the_units_reserved_is_refused_and_nothing_written() -> None:
    """Two units held by a live reservation: 1 on hand is refused (saying how many are
    reserved), nothing committed; 2 is taken."""
    inventory = Inventory()
    inventory.put("A", 5)
    inventory.reservations[("saga-1", "A")] = Reservation(
        2, "RESERVED", datetime.now(UTC) + timedelta(minutes=2))
    uow = StagingUnitOfWork()
    with pytest.raises(BelowReserved) as refused:
        await set_stock(uow, FakeStockRepository(inventory, uow), "A", 1)
    assert (refused.value.quantity, refused.value.reserved) == (1, 2)
    assert uow.commits == 0 and inventory.products == {"A": 5}

    uow = StagingUnitOfWork()
    product = await set_stock(uow, FakeStockRepository(inventory, uow), "A", 2)
    assert uow.committed and (product.quantity, product.reserved, product.available) == (2, 2, 0)


async def test_a_quantity_left_out_keeps_the_units_the_product_has_when_locked() -> None:
    """A change of strategy alone: the units are the ones read under the product's lock, not
    a count the operator read before orders took units."""
    inventory = Inventory()
    inventory.put("A", 7)
    uow = StagingUnitOfWork()
    product = await set_stock(uow, FakeStockRepository(inventory, uow), "A", None,
                              strategy=AllocationStrategy.AUTO)
    assert uow.commits == 1 and inventory.products == {"A": 7}
    assert (product.quantity, product.allocation_strategy) == (7, AllocationStrategy.AUTO)


async def test_a_new_product_needs_its_quantity_and_nothing_is_written_without() -> None:
    inventory = Inventory()
    uow = StagingUnitOfWork()
    with pytest.raises(QuantityRequired):
        await set_stock(uow, FakeStockRepository(inventory, uow), "A", None)
    assert uow.commits == 0 and inventory.products == {}
