"""inventario's HTTP API: stock administration and queries (never a saga step).

Setting stock is for operators; any caller with a valid token may read a product."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Request, Security
from pydantic import BaseModel, ConfigDict, Field

from inventario.adapters.stock_repository import StockRepository, find_product
from inventario.usecases.set_stock import set_stock
from sagakit.auth import AUTH_RESPONSES, CUSTOMER, OPERATOR, require, require_operator
from sagakit.runtime import runtime_of

router = APIRouter(tags=["products"])

Sku = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._\-]+$")]


class StockUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    quantity: int = Field(..., ge=0, le=10_000_000)


class Product(BaseModel):
    sku: str
    quantity: int
    updated_at: datetime


@router.put("/products/{sku}", response_model=Product, responses=AUTH_RESPONSES,
            dependencies=[Security(require_operator)])
async def put_product(sku: Sku, body: StockUpdate, request: Request) -> Product:
    async with runtime_of(request).uow() as uow:
        product = await set_stock(uow, StockRepository(uow), sku, body.quantity)
    return Product(sku=product.sku, quantity=product.quantity, updated_at=product.updated_at)


@router.get("/products/{sku}", response_model=Product,
            responses={**AUTH_RESPONSES, 404: {"description": "No such product"}},
            dependencies=[Security(require(CUSTOMER, OPERATOR))])
async def get_product(sku: Sku, request: Request) -> Product:
    async with runtime_of(request).engine.connect() as conn:
        product = await find_product(conn, sku)
    if product is None:
        raise HTTPException(404, detail=f"product {sku} not found")
    return Product(sku=product.sku, quantity=product.quantity, updated_at=product.updated_at)
