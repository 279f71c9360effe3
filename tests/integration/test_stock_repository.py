"""inventario's statements against real PostgreSQL: the validation read (the saga's allocation
status and the units on hand, in one statement, whether or not the saga has an allocation row
and whether or not the products exist), the allocation's first statement (its timeouts, then
every lock it needs, the lock timeout binding them), and the allocation's writes."""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import pytest
from harness import config, db
from harness.clients import new_sku
from harness.faults import row_locked
from inventario.adapters.stock_repository import AllocationLocks, StockRepository
from inventario.domain.stock import AllocationStatus, Line
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection


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


async def _locked_elsewhere(sku: str) -> bool:
    """Whether another transaction holds ``sku``'s product row lock."""
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        async with conn.transaction():
            await conn.fetch("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE NOWAIT",
                             sku)
        return False
    except asyncpg.LockNotAvailableError:
        return True
    finally:
        await conn.close()


async def test_the_allocations_first_statement_sets_its_timeouts_and_takes_every_lock(
        running_stack: None) -> None:
    checked, never, allocated = (f"probe-{uuid.uuid4()}" for _ in range(3))
    a, b, absent, other = new_sku(), new_sku(), new_sku(), new_sku()
    await db.execute("INSERT INTO inventario.products (sku, quantity) VALUES ($1, 4), ($2, 9), "
                     "($3, 1)", a, b, other)
    async with db.probe() as conn:
        repo = StockRepository(conn)
        await repo.stock_check(checked, str(uuid.uuid4()),
                               [Line(b, 2), Line(a, 1), Line(absent, 1), Line(b, 1)],
                               "ok").run(conn, "inventario")
        locked = await repo.lock_for_allocation(checked, lock_timeout_ms=1234,
                                                statement_timeout_ms=5678)
        assert locked == AllocationLocks(
            checked=[Line(b, 2), Line(a, 1), Line(absent, 1), Line(b, 1)], allocation=None,
            on_hand={a: 4, b: 9})
        assert (await conn.execute(text("SHOW lock_timeout"))).scalar() == "1234ms"
        assert (await conn.execute(text("SHOW statement_timeout"))).scalar() == "5678ms"
        assert await _locked_elsewhere(a) and await _locked_elsewhere(b)
        assert not await _locked_elsewhere(other)

        assert await repo.lock_for_allocation(never, lock_timeout_ms=1,
                                              statement_timeout_ms=1000) == AllocationLocks(
            checked=None, allocation=None, on_hand={})

    # A saga that has its allocation already: its row is locked, no product is.
    async with db.probe() as conn:
        repo = StockRepository(conn)
        await repo.stock_check(allocated, str(uuid.uuid4()), [Line(other, 1)],
                               "ok").run(conn, "inventario")
        assert await repo.insert_allocation(allocated, None, AllocationStatus.RELEASED,
                                            [Line(other, 1)])
        assert await repo.lock_for_allocation(allocated, lock_timeout_ms=1000,
                                              statement_timeout_ms=1000) == AllocationLocks(
            checked=[Line(other, 1)], allocation=AllocationStatus.RELEASED, on_hand={})
        assert not await _locked_elsewhere(other)


async def test_the_allocations_lock_timeout_binds_the_locks_of_its_own_statement(
        running_stack: None) -> None:
    sku, saga_id = new_sku(), f"probe-{uuid.uuid4()}"
    await db.execute("INSERT INTO inventario.products (sku, quantity) VALUES ($1, 3)", sku)
    async with row_locked("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE", sku):
        async with db.probe() as conn:
            repo = StockRepository(conn)
            await repo.stock_check(saga_id, str(uuid.uuid4()), [Line(sku, 1)],
                                   "ok").run(conn, "inventario")
            started = time.monotonic()
            # Without its own timeout the statement would wait for the lock for as long as the
            # other transaction holds it (the bound here only keeps a failure from hanging).
            with pytest.raises(asyncpg.LockNotAvailableError):
                await asyncio.wait_for(repo.lock_for_allocation(
                    saga_id, lock_timeout_ms=200, statement_timeout_ms=30_000), 10)
            assert time.monotonic() - started < 5


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


async def _product_scans(conn: AsyncConnection) -> tuple[int, int]:
    """Sequential and index scans of inventario.products by this transaction so far."""
    row = (await conn.execute(text(
        "SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables "
        "WHERE schemaname = 'inventario' AND relname = 'products'"))).one()
    return int(row[0]), int(row[1])


async def test_validation_and_allocation_find_products_by_key_in_a_large_catalogue(
        running_stack: None) -> None:
    """Each step touches a line's few products: a step that scanned the whole catalogue would
    cost more with every product added. The allocation's update did, until session 13 (7.7 ms
    of its 9 ms with 4,900 products): joined to the lines alone it was planned as a scan for
    catalogues of about 1,000 to 10,000 products (with 20,000 the scan cost more than a hundred
    lookups, PostgreSQL's guess at the lines, and it looked them up)."""
    a, b = new_sku(), new_sku()
    saga_id, order_id = f"probe-{uuid.uuid4()}", str(uuid.uuid4())
    lines = [Line(a, 2), Line(b, 1), Line(a, 1)]
    async with db.probe() as conn:
        await conn.execute(text(
            "INSERT INTO inventario.products (sku, quantity) "
            "SELECT 'CATALOGUE-' || g || '-' || :tag, 5 FROM generate_series(1, 5000) AS g"),
            {"tag": saga_id})
        await conn.execute(text(
            "INSERT INTO inventario.products (sku, quantity) VALUES (:a, 10), (:b, 10)"),
            {"a": a, "b": b})
        await conn.execute(text("ANALYZE inventario.products"))
        # The services' statements are prepared and, after a few runs, planned once for any
        # values: judge that plan.
        await conn.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
        repo = StockRepository(conn)
        seq_before, idx_before = await _product_scans(conn)

        assert await repo.validation_read(saga_id, [a, b]) == (None, {a: 10, b: 10})
        await repo.stock_check(saga_id, order_id, lines, "ok").run(conn, "inventario")
        locked = await repo.lock_for_allocation(saga_id, lock_timeout_ms=1000,
                                                statement_timeout_ms=5000)
        assert locked.on_hand == {a: 10, b: 10}
        await repo.allocation(saga_id, order_id, AllocationStatus.ALLOCATED,
                              lines).run(conn, "inventario")
        assert await repo.validation_read(saga_id, [a, b]) == (
            AllocationStatus.ALLOCATED, {a: 7, b: 9})

        seq_after, idx_after = await _product_scans(conn)
        assert seq_after == seq_before, "a step scanned the whole catalogue"
        assert idx_after > idx_before
