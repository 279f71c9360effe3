"""PUT /products/{sku}: sets a product's stock (creates it if needed)."""

from __future__ import annotations

from inventario.usecases.ports import ProductStock, ProductStore
from sagakit.ports import UnitOfWorkPort


async def set_stock(uow: UnitOfWorkPort, products: ProductStore, sku: str,
                    quantity: int) -> ProductStock:
    await products.set_quantity(sku, quantity)
    product = await products.product(sku)
    await uow.commit()
    assert product is not None
    return product
