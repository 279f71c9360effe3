"""inventario's HTTP API: stock and catalog price administration and queries (never a saga step).

Setting stock and prices is for operators; any caller with a valid token may read a product."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Self

from fastapi import APIRouter, HTTPException, Path, Request, Security
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from inventario.adapters.stock_repository import StockRepository, find_product
from inventario.domain.allocation_strategy import AllocationStrategy
from inventario.domain.payment_match import Money
from inventario.usecases.ports import ProductStock
from inventario.usecases.set_stock import BelowReserved, QuantityRequired, set_stock
from saga_contracts.events.fields import Currency
from saga_contracts.minor_units import exponent, fits
from sagakit.auth import AUTH_RESPONSES, CUSTOMER, OPERATOR, require, require_operator
from sagakit.runtime import runtime_of

router = APIRouter(tags=["products"])

Sku = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._\-]+$")]

# A catalog price: more than zero (the gateway charges no amount of nothing), what the
# products table's Numeric(12, 2) holds, and no more decimals than its currency has (checked
# with the currency, below).
CatalogPrice = Annotated[Decimal, Field(gt=0, max_digits=12, decimal_places=2,
                                        allow_inf_nan=False)]


class StockUpdate(BaseModel):
    """The product's units on hand and, optionally, its catalog price: ``price`` and
    ``currency`` come together; left out, the product keeps the price it has. The quantity is a
    JSON integer (``true``, ``"7"`` or ``7.0`` are refused, never read as a count); left out, a
    product that exists keeps its units, so that a change of price or strategy during a sale
    cannot write back a count read before orders took units."""

    model_config = ConfigDict(extra="forbid")
    quantity: StrictInt | None = Field(None, ge=0, le=10_000_000, description=(
        "Units on hand. Left out: the product keeps the units it has (a new product needs "
        "them)."))
    price: CatalogPrice | None = None
    currency: Currency | None = None
    allocation_strategy: AllocationStrategy | None = Field(None, description=(
        "How orders take the product's units: check_then_pay (checked at validation, taken "
        "after the payment), reserve_then_pay (held at validation until the payment or the "
        "reservation's deadline) or auto (reserves while orders in flight approach the "
        "available units). Left out: the product keeps its strategy (a new one: "
        "check_then_pay)."))

    @model_validator(mode="after")
    def _price_whole(self) -> Self:
        errors: list[InitErrorDetails] = []
        if (self.price is None) != (self.currency is None):
            missing = "currency" if self.currency is None else "price"
            errors.append(InitErrorDetails(
                type=PydanticCustomError("missing", "price and currency are given together"),
                loc=(missing,), input=None))
        elif self.price is not None and self.currency is not None \
                and not fits(self.price, self.currency):
            places = exponent(self.currency)
            errors.append(InitErrorDetails(
                type=PydanticCustomError(
                    "currency_decimal_places",
                    "{currency} has {places} decimal places (ISO 4217): the price has more",
                    {"currency": self.currency, "places": places}),
                loc=("price",), input=str(self.price)))
        if errors:
            # Raised as the fields' own errors: the 422 names the field, as for any other.
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self


class Product(BaseModel):
    sku: str
    quantity: int = Field(description="Units on hand")
    reserved: int = Field(description="Units held by live reservations (reserve_then_pay "
                          "orders awaiting their payment)")
    available: int = Field(description="Units an order can still have: quantity less "
                           "reserved, never below zero")
    allocation_strategy: AllocationStrategy
    price: str | None = Field(None, description="Catalog price (two places); null: none, and "
                              "the product is not for sale")
    currency: str | None = None
    updated_at: datetime


def _view(product: ProductStock) -> Product:
    return Product(sku=product.sku, quantity=product.quantity, reserved=product.reserved,
                   available=product.available,
                   allocation_strategy=product.allocation_strategy,
                   price=None if product.price is None else f"{product.price.amount:.2f}",
                   currency=None if product.price is None else product.price.currency,
                   updated_at=product.updated_at)


@router.put("/products/{sku}", response_model=Product, responses={
    **AUTH_RESPONSES, 409: {"description": "The quantity is below the units reserved "
                                           "(detail: the field and how many are reserved)"}},
    dependencies=[Security(require_operator)])
async def put_product(sku: Sku, body: StockUpdate, request: Request) -> Product:
    price = (Money(body.price, body.currency)
             if body.price is not None and body.currency is not None else None)
    try:
        async with runtime_of(request).uow() as uow:
            product = await set_stock(uow, StockRepository(uow), sku, body.quantity, price,
                                      body.allocation_strategy)
    except QuantityRequired:
        # As the 422 a missing field gets: the field and why.
        raise HTTPException(422, detail=[{
            "loc": ["body", "quantity"], "type": "missing", "input": None,
            "msg": f"{sku} does not exist yet: a new product needs its quantity"}]) from None
    except BelowReserved as refused:
        # Shaped as a 422's field error: the field, why, and the figure it must reach.
        raise HTTPException(409, detail=[{
            "loc": ["body", "quantity"], "type": "below_reserved", "input": refused.quantity,
            "msg": (f"live reservations hold {refused.reserved} units of {sku}: the quantity "
                    f"cannot go below {refused.reserved}"),
            "ctx": {"reserved": refused.reserved}}]) from None
    return _view(product)


@router.get("/products/{sku}", response_model=Product,
            responses={**AUTH_RESPONSES, 404: {"description": "No such product"}},
            dependencies=[Security(require(CUSTOMER, OPERATOR))])
async def get_product(sku: Sku, request: Request) -> Product:
    async with runtime_of(request).engine.connect() as conn:
        product = await find_product(conn, sku)
    if product is None:
        raise HTTPException(404, detail=f"product {sku} not found")
    return _view(product)
