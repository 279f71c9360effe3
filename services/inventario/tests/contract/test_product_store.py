"""``ProductStore``'s contract (inventario.usecases.ports), run on the in-memory fake and on
``StockRepository`` over PostgreSQL: a product's units on hand and catalog price set, created if
needed, a price left out kept, and read back in the same unit of work and after its commit."""

from __future__ import annotations

import uuid
from decimal import Decimal

from inventario.domain.payment_match import Money

from .backends import StockBackend

PRICE = Money(Decimal("5.00"), "USD")


async def test_a_product_is_created_with_or_without_a_price(stock: StockBackend) -> None:
    plain, priced = f"P-{uuid.uuid4()}", f"P-{uuid.uuid4()}"
    async with stock.unit() as (uow, products):
        await products.set_product(plain, 3, None)
        await products.set_product(priced, 4, PRICE)
        made = await products.product(plain)
        assert made is not None and (made.sku, made.quantity, made.price) == (plain, 3, None)
        assert await uow.commit()
    async with stock.unit() as (_, products):
        found = await products.product(priced)
        assert found is not None and (found.quantity, found.price) == (4, PRICE)
        assert await products.product(f"P-{uuid.uuid4()}") is None


async def test_a_price_left_out_keeps_the_one_the_product_has(stock: StockBackend) -> None:
    sku = f"P-{uuid.uuid4()}"
    async with stock.unit() as (uow, products):
        await products.set_product(sku, 7, PRICE)
        assert await uow.commit()
    async with stock.unit() as (uow, products):
        first = await products.product(sku)
        await products.set_product(sku, 2, None)
        assert await uow.commit()
    async with stock.unit() as (uow, products):
        again = await products.product(sku)
        assert again is not None and first is not None
        assert (again.quantity, again.price) == (2, PRICE)
        assert again.updated_at >= first.updated_at
        await products.set_product(sku, 2, Money(Decimal("6.50"), "USD"))
        assert await uow.commit()
    async with stock.unit() as (_, products):
        repriced = await products.product(sku)
        assert repriced is not None and repriced.price == Money(Decimal("6.50"), "USD")


async def test_a_product_set_in_a_unit_that_never_commits_is_not_written(
        stock: StockBackend) -> None:
    sku = f"P-{uuid.uuid4()}"
    async with stock.unit() as (_, products):
        await products.set_product(sku, 9, PRICE)
        assert await products.product(sku) is not None  # its own writes, before its commit
    async with stock.unit() as (_, products):
        assert await products.product(sku) is None
