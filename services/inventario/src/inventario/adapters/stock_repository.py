"""Queries of inventario's tables, on the unit of work's connection."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from inventario.adapters.tables import allocations, products, stock_checks
from inventario.domain.stock import AllocationStatus, Line


def lines_to_json(lines: list[Line]) -> list[dict[str, Any]]:
    return [{"sku": line.sku, "quantity": line.quantity} for line in lines]


def lines_from_json(items: list[dict[str, Any]]) -> list[Line]:
    return [Line(i["sku"], int(i["quantity"])) for i in items]


class StockRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def read_on_hand(self, skus: list[str]) -> dict[str, int]:
        """A plain read: no lock, nothing changed (the validation step)."""
        rows = await self.conn.execute(select(products.c.sku, products.c.quantity)
                                       .where(products.c.sku.in_(skus)))
        return {sku: qty for sku, qty in rows}

    async def lock_on_hand(self, skus: list[str]) -> dict[str, int]:
        """SELECT … FOR UPDATE, in SKU order (the caller passes them sorted)."""
        rows = await self.conn.execute(select(products.c.sku, products.c.quantity)
                                       .where(products.c.sku.in_(skus))
                                       .order_by(products.c.sku).with_for_update())
        return {sku: qty for sku, qty in rows}

    async def decrement(self, lines: list[Line]) -> None:
        for line in lines:
            await self.conn.execute(update(products).where(products.c.sku == line.sku).values(
                quantity=products.c.quantity - line.quantity, updated_at=func.now()))

    async def put_back(self, lines: list[Line]) -> None:
        """Adds units back; a product deleted meanwhile is recreated with them."""
        for line in lines:
            stmt = pg_insert(products).values(sku=line.sku, quantity=line.quantity)
            await self.conn.execute(stmt.on_conflict_do_update(
                index_elements=[products.c.sku],
                set_={"quantity": products.c.quantity + line.quantity, "updated_at": func.now()}))

    async def set_quantity(self, sku: str, quantity: int) -> None:
        stmt = pg_insert(products).values(sku=sku, quantity=quantity)
        await self.conn.execute(stmt.on_conflict_do_update(
            index_elements=[products.c.sku], set_={"quantity": quantity, "updated_at": func.now()}))

    async def product(self, sku: str) -> dict[str, Any] | None:
        row = (await self.conn.execute(select(products).where(products.c.sku == sku))).first()
        return dict(row._mapping) if row else None

    # ---- validation records

    async def record_check(self, saga_id: str, order_id: str, lines: list[Line],
                           result: str) -> None:
        await self.conn.execute(pg_insert(stock_checks).values(
            saga_id=saga_id, order_id=uuid.UUID(order_id), items=lines_to_json(lines),
            result=result).on_conflict_do_nothing(index_elements=[stock_checks.c.saga_id]))

    async def checked_lines(self, saga_id: str) -> list[Line] | None:
        row = (await self.conn.execute(select(stock_checks.c["items"])
                                       .where(stock_checks.c.saga_id == saga_id))).first()
        return lines_from_json(row._mapping["items"]) if row else None

    # ---- allocations

    async def allocation_status(self, saga_id: str) -> AllocationStatus | None:
        row = (await self.conn.execute(select(allocations.c.status)
                                       .where(allocations.c.saga_id == saga_id))).first()
        return AllocationStatus(row.status) if row else None

    async def lock_allocation(self, saga_id: str) -> tuple[AllocationStatus, list[Line]] | None:
        row = (await self.conn.execute(select(allocations.c.status, allocations.c["items"])
                                       .where(allocations.c.saga_id == saga_id)
                                       .with_for_update())).first()
        return (AllocationStatus(row.status), lines_from_json(row._mapping["items"])) if row else None

    async def insert_allocation(self, saga_id: str, order_id: str | None,
                                status: AllocationStatus, lines: list[Line]) -> bool:
        """False when another transaction recorded the saga's allocation first."""
        res = await self.conn.execute(
            pg_insert(allocations).values(saga_id=saga_id,
                                          order_id=uuid.UUID(order_id) if order_id else None,
                                          status=status.value, items=lines_to_json(lines))
            .on_conflict_do_nothing(index_elements=[allocations.c.saga_id])
            .returning(allocations.c.saga_id))
        return res.first() is not None

    async def transition_allocation(self, saga_id: str, expected: AllocationStatus,
                                    new: AllocationStatus) -> bool:
        res = await self.conn.execute(
            update(allocations)
            .where(allocations.c.saga_id == saga_id, allocations.c.status == expected.value)
            .values(status=new.value, updated_at=func.now()))
        return res.rowcount == 1
