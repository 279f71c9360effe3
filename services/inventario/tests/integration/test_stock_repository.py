"""inventario's statements against real PostgreSQL: the validation read (the saga's allocation
status and the units on hand, in one statement, whether or not the saga has an allocation row
and whether or not the products exist), the allocation's read (without locks), and the
allocation's write: its lock timeout binding the locks it takes, and its guard, which writes
nothing when the locked units disagree with the decision or the saga was allocated meanwhile."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from inventario.adapters.stock_repository import AllocationState, StockRepository
from inventario.domain.stock import AllocationStatus, Line
from saga_harness import db
from saga_harness.clients import new_sku
from saga_harness.faults import row_locked
from sagakit.errors import sqlstate
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


async def test_the_allocation_state_is_read_in_one_statement_without_locks(
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
        assert await repo.allocation_state(checked) == AllocationState(
            checked=[Line(b, 2), Line(a, 1), Line(absent, 1), Line(b, 1)], allocation=None,
            on_hand={a: 4, b: 9})
        # The read locks nothing: a concurrent allocation may take the units meanwhile, which
        # the allocation's write checks under its locks.
        async with row_locked("SELECT 1 FROM inventario.products WHERE sku = ANY($1) "
                              "FOR UPDATE NOWAIT", [a, b]):
            pass
        assert await repo.allocation_state(never) == AllocationState(
            checked=None, allocation=None, on_hand={})
        # A saga that has its allocation already: no product is read.
        await repo.stock_check(allocated, str(uuid.uuid4()), [Line(other, 1)],
                               "ok").run(conn, "inventario")
        assert await repo.insert_allocation(allocated, None, AllocationStatus.RELEASED,
                                            [Line(other, 1)])
        assert await repo.allocation_state(allocated) == AllocationState(
            checked=[Line(other, 1)], allocation=AllocationStatus.RELEASED, on_hand={})


async def test_the_allocations_lock_timeout_binds_the_locks_of_its_own_statement(
        running_stack: None) -> None:
    sku, saga_id = new_sku(), f"probe-{uuid.uuid4()}"
    await db.execute("INSERT INTO inventario.products (sku, quantity) VALUES ($1, 3)", sku)
    async with row_locked("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE", sku):
        async with db.probe() as conn:
            repo = StockRepository(conn)
            started = time.monotonic()
            # Without its own timeout the statement would wait for the lock for as long as the
            # other transaction holds it (the bound here only keeps a failure from hanging).
            with pytest.raises(Exception) as failure:
                await asyncio.wait_for(repo.allocation(
                    saga_id, str(uuid.uuid4()), AllocationStatus.ALLOCATED, [Line(sku, 1)],
                    lock_timeout_ms=200).run(conn, "inventario"), 10)
            assert sqlstate(failure.value) == "55P03", repr(failure.value)
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
        assert await repo.allocation(saga_id, order_id, AllocationStatus.ALLOCATED, lines,
                                     lock_timeout_ms=1000).run(conn, "inventario")
        assert await repo.validation_read(saga_id, [a, b, untouched]) == (
            AllocationStatus.ALLOCATED, {a: 5, b: 0, untouched: 3})
        # The saga's allocation was recorded already: nothing recorded, nothing taken.
        assert not await repo.allocation(saga_id, order_id, AllocationStatus.ALLOCATED,
                                         [Line(untouched, 1)],
                                         lock_timeout_ms=1000).run(conn, "inventario")
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
        assert await repo.allocation(saga_id, str(uuid.uuid4()), AllocationStatus.FAILED,
                                     [Line(sku, 2)], lock_timeout_ms=1000).run(conn, "inventario")
        assert await repo.validation_read(saga_id, [sku]) == (AllocationStatus.FAILED, {sku: 1})


async def test_an_allocation_the_locked_units_disagree_with_writes_nothing(
        running_stack: None) -> None:
    """The decision was taken on units read without a lock; the statement writes only if the
    units it locks agree: a unit taken meanwhile (the race the saga refunds) or put back
    meanwhile makes the consumer handle the message again on what is there now."""
    sku, absent = new_sku(), new_sku()
    taken, put_back, unknown = (f"probe-{uuid.uuid4()}" for _ in range(3))
    async with db.probe() as conn:
        await conn.execute(text("INSERT INTO inventario.products (sku, quantity) VALUES (:a, 1)"),
                           {"a": sku})
        repo = StockRepository(conn)
        # Decided ALLOCATED on 2 units read; 1 is left.
        assert not await repo.allocation(taken, str(uuid.uuid4()), AllocationStatus.ALLOCATED,
                                         [Line(sku, 2)], lock_timeout_ms=1000
                                         ).run(conn, "inventario")
        # Decided FAILED on none read; 1 is there again.
        assert not await repo.allocation(put_back, str(uuid.uuid4()), AllocationStatus.FAILED,
                                         [Line(sku, 1)], lock_timeout_ms=1000
                                         ).run(conn, "inventario")
        # A product that does not exist has no units.
        assert not await repo.allocation(unknown, str(uuid.uuid4()),
                                         AllocationStatus.ALLOCATED,
                                         [Line(sku, 1), Line(absent, 1)], lock_timeout_ms=1000
                                         ).run(conn, "inventario")
        for saga_id in (taken, put_back, unknown):
            assert await repo.validation_read(saga_id, [sku]) == (None, {sku: 1})


async def _product_scans(conn: AsyncConnection) -> tuple[int, int]:
    """Sequential and index scans of inventario.products by this transaction so far."""
    row = (await conn.execute(text(
        "SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables "
        "WHERE schemaname = 'inventario' AND relname = 'products'"))).one()
    return int(row[0]), int(row[1])


async def test_validation_and_allocation_find_products_by_key_in_a_large_catalogue(
        running_stack: None) -> None:
    """Each step touches a line's few products: a step that scanned the whole catalogue would
    cost more with every product added. The allocation's update once did (7.7 ms of its 9 ms
    with 4,900 products): joined to the lines alone it was planned as a scan for
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
        state = await repo.allocation_state(saga_id)
        assert state.on_hand == {a: 10, b: 10}
        assert await repo.allocation(saga_id, order_id, AllocationStatus.ALLOCATED, lines,
                                     lock_timeout_ms=1000).run(conn, "inventario")
        assert await repo.validation_read(saga_id, [a, b]) == (
            AllocationStatus.ALLOCATED, {a: 7, b: 9})

        seq_after, idx_after = await _product_scans(conn)
        assert seq_after == seq_before, "a step scanned the whole catalogue"
        assert idx_after > idx_before
