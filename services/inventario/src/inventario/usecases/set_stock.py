"""PUT /products/{sku}: sets a product's stock and, if given, its catalog price and allocation
strategy (creates the product if needed). A price or strategy left out keeps the one the
product has (a new product: no price, ``check_then_pay``)."""

from __future__ import annotations

from inventario.domain.allocation_strategy import AllocationStrategy
from inventario.domain.payment_match import Money
from inventario.usecases.ports import ProductStock, ProductStore
from sagakit.ports import UnitOfWorkPort


async def set_stock(uow: UnitOfWorkPort, products: ProductStore, sku: str,
                    quantity: int, price: Money | None = None,
                    strategy: AllocationStrategy | None = None) -> ProductStock:
    await products.set_product(sku, quantity, price, strategy)
    product = await products.product(sku)
    await uow.commit()
    assert product is not None
    return product
