"""inventario's validation read against real PostgreSQL: the saga's allocation status and the
units on hand, in one statement, whether or not the saga has an allocation row and whether or
not the products exist."""

from __future__ import annotations

import uuid

from harness import db
from harness.clients import new_sku
from inventario.adapters.stock_repository import StockRepository
from inventario.domain.stock import AllocationStatus, Line
from sqlalchemy import text


async def test_the_validation_read_answers_both_questions_in_one_statement(
        running_stack: None) -> None:
    known, other, absent = new_sku(), new_sku(), new_sku()
    fresh, cancelled = f"probe-{uuid.uuid4()}", f"probe-{uuid.uuid4()}"
    async with db.probe() as conn:
        await conn.execute(text(
            "INSERT INTO inventario.products (sku, quantity) VALUES (:a, 7), (:b, 0)"),
            {"a": known, "b": other})
        repo = StockRepository(conn)
        assert await repo.insert_allocation(cancelled, None, AllocationStatus.BLOCKED,
                                            [Line(known, 1)])

        assert await repo.validation_read(fresh, [known, other, absent]) == (
            None, {known: 7, other: 0})
        assert await repo.validation_read(cancelled, [known]) == (
            AllocationStatus.BLOCKED, {known: 7})
        # None of the products exists: still one answer, with the allocation status.
        assert await repo.validation_read(cancelled, [absent]) == (
            AllocationStatus.BLOCKED, {})
        assert await repo.validation_read(fresh, [absent]) == (None, {})
