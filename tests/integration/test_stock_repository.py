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


async def test_the_allocations_first_statement_sets_its_timeouts_and_reads_the_lines(
        running_stack: None) -> None:
    checked, never = f"probe-{uuid.uuid4()}", f"probe-{uuid.uuid4()}"
    sku = new_sku()
    async with db.probe() as conn:
        repo = StockRepository(conn)
        await repo.stock_check(checked, str(uuid.uuid4()), [Line(sku, 2)], "ok").run(conn, "inventario")
        assert await repo.set_timeouts_and_read_checked_lines(
            checked, lock_timeout_ms=1234, statement_timeout_ms=5678) == [Line(sku, 2)]
        assert (await conn.execute(text("SHOW lock_timeout"))).scalar() == "1234ms"
        assert (await conn.execute(text("SHOW statement_timeout"))).scalar() == "5678ms"
        assert await repo.set_timeouts_and_read_checked_lines(
            never, lock_timeout_ms=1, statement_timeout_ms=1000) is None


async def test_an_allocation_takes_every_lines_units_and_records_itself_once(
        running_stack: None) -> None:
    a, b, untouched = new_sku(), new_sku(), new_sku()
    saga_id, order_id = f"probe-{uuid.uuid4()}", str(uuid.uuid4())
    async with db.probe() as conn:
        await conn.execute(text(
            "INSERT INTO inventario.products (sku, quantity) VALUES (:a, 10), (:b, 5), (:c, 3)"),
            {"a": a, "b": b, "c": untouched})
        repo = StockRepository(conn)
        # Two lines of one SKU count together.
        lines = [Line(a, 2), Line(b, 5), Line(a, 3)]
        assert await repo.lock_on_hand([a, b]) == {a: 10, b: 5}
        await repo.allocation(saga_id, order_id, AllocationStatus.ALLOCATED, lines).run(conn, "inventario")
        assert await repo.validation_read(saga_id, [a, b, untouched]) == (
            AllocationStatus.ALLOCATED, {a: 5, b: 0, untouched: 3})
        # The saga's allocation was recorded already: nothing recorded, nothing taken.
        await repo.allocation(saga_id, order_id, AllocationStatus.ALLOCATED,
                              [Line(untouched, 1)]).run(conn, "inventario")
        assert await repo.validation_read(saga_id, [untouched]) == (
            AllocationStatus.ALLOCATED, {untouched: 3})
        row = (await conn.execute(text(
            "SELECT order_id::text, items FROM inventario.allocations WHERE saga_id = :s"),
            {"s": saga_id})).one()
        assert row.order_id == order_id
        assert row.items == [{"sku": a, "quantity": 2}, {"sku": b, "quantity": 5},
                             {"sku": a, "quantity": 3}]


async def test_a_failed_allocation_records_itself_and_takes_nothing(running_stack: None) -> None:
    sku, saga_id = new_sku(), f"probe-{uuid.uuid4()}"
    async with db.probe() as conn:
        await conn.execute(text("INSERT INTO inventario.products (sku, quantity) VALUES (:a, 1)"),
                           {"a": sku})
        repo = StockRepository(conn)
        await repo.allocation(saga_id, str(uuid.uuid4()), AllocationStatus.FAILED,
                              [Line(sku, 1)]).run(conn, "inventario")
        assert await repo.validation_read(saga_id, [sku]) == (AllocationStatus.FAILED, {sku: 1})
