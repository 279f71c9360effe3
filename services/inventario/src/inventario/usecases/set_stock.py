"""PUT /products/{sku}: sets a product's stock and, if given, its catalog price (creates the
product if needed). A price left out keeps the one the product has."""

from __future__ import annotations

from inventario.domain.payment_match import Money
from inventario.usecases.ports import ProductStock, ProductStore
from sagakit.ports import UnitOfWorkPort


async def set_stock(uow: UnitOfWorkPort, products: ProductStore, sku: str,
                    quantity: int, price: Money | None = None) -> ProductStock:
    await products.set_product(sku, quantity, price)
    product = await products.product(sku)
    await uow.commit()
    assert product is not None
    return product
