"""PUT /products/{sku}: sets a product's stock (creates it if needed)."""

from __future__ import annotations

from typing import Any

from sagakit.store.unit_of_work import UnitOfWork

from inventario.adapters.stock_repository import StockRepository


async def set_stock(uow: UnitOfWork, sku: str, quantity: int) -> dict[str, Any]:
    repo = StockRepository(uow.connection)
    await repo.set_quantity(sku, quantity)
    product = await repo.product(sku)
    await uow.commit()
    assert product is not None
    return product
