"""PUT /products/{sku}: sets a product's stock and, if given, its catalog price and allocation
strategy (creates the product if needed). A price or strategy left out keeps the one the
product has (a new product: no price, ``check_then_pay``); so does a quantity left out, read
under the product's lock: a change of price or strategy in the middle of a sale never writes
back a count that orders have taken units from since it was read.

The units on hand never go below the units live reservations hold: a saga holding them was
promised them before pagos charged it (reserve_then_pay). The product is locked first and what
is reserved read after the lock, so that a reservation committed while the lock was waited for
counts; a reservation that waits for this lock reads the new quantity once it has it."""

from __future__ import annotations

from inventario.domain.allocation_strategy import AllocationStrategy
from inventario.domain.payment_match import Money
from inventario.usecases.ports import ProductStock, ProductStore
from sagakit.ports import UnitOfWorkPort


class QuantityRequired(Exception):
    """A product that does not exist yet is created with its units: the quantity is needed."""

    def __init__(self, sku: str) -> None:
        super().__init__(f"{sku} does not exist yet: give its quantity")
        self.sku = sku


class BelowReserved(Exception):
    """The quantity asked for is below the units live reservations of the product hold."""

    def __init__(self, sku: str, quantity: int, reserved: int) -> None:
        super().__init__(f"{sku}: {quantity} units on hand would be below the {reserved} "
                         "units reserved")
        self.sku, self.quantity, self.reserved = sku, quantity, reserved


async def set_stock(uow: UnitOfWorkPort, products: ProductStore, sku: str,
                    quantity: int | None, price: Money | None = None,
                    strategy: AllocationStrategy | None = None) -> ProductStock:
    """The product as committed; ``BelowReserved`` (nothing written) when ``quantity`` is below
    what its live reservations hold; ``QuantityRequired`` when it is left out (None) for a
    product that does not exist."""
    current = await products.lock_product(sku)
    if quantity is None:
        if current is None:
            raise QuantityRequired(sku)
        quantity = current.quantity
    if current is not None and quantity < current.reserved:
        raise BelowReserved(sku, quantity, current.reserved)
    await products.set_product(sku, quantity, price, strategy)
    product = await products.product(sku)
    await uow.commit()
    assert product is not None
    return product
