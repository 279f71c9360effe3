"""inventario's statements against real PostgreSQL: the validation read (the saga's allocation
status and the units on hand, in one statement, whether or not the saga has an allocation row
and whether or not the products exist), the allocation's read (without locks), and the
allocation's write: its lock timeout binding the locks it takes, and its guard, which writes
nothing when the locked units disagree with the decision or the saga was allocated meanwhile.
Last, a validation and an allocation through their handlers and a real unit of work, on a copy
of the tables in another schema: every statement of theirs reaches the copy; and, on
connections with inventario's statement timeout, the allocation waits for a product's lock as
long as the lock timeout says, not the shorter statement timeout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from inventario.adapters.stock_repository import StockRepository
from inventario.adapters.tables import messaging
from inventario.app import database_settings
from inventario.config import InventarioSettings
from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line
from inventario.entrypoints.messages import make_on_orden_solicitada, make_on_pago_exitoso
from inventario.usecases.ports import AllocationState, RecordedCheck, ValidationRead
from saga_contracts.events.inventory import Shortage, StockNoDisponible
from saga_contracts.events.orders import OrdenSolicitada
from saga_contracts.events.payments import PagoExitoso
from saga_harness import config, db, sealing
from saga_harness.clients import new_sku
from saga_harness.events import orden_solicitada, pago_exitoso
from saga_harness.faults import row_locked
from saga_harness.waiting import wait_for
from sagakit.errors import sqlstate
from sagakit.message import Message
from sagakit.store.commit_statement import StagedWrite
from sagakit.store.tables import MessagingTables

from .scratch_tables import add_product, deliver, scratch_copy


class _OnProbe:
    """What ``StockRepository`` uses of its unit of work, on a probe connection: reads on it,
    and the write it stages run by ``write`` in the probe's transaction (True unless its guard
    found nothing), as the commit statement would run it."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.connection = conn
        self.tables = messaging
        self._staged: StagedWrite | None = None

    def stage(self, write: StagedWrite) -> None:
        assert self._staged is None, "one staged write per unit of work"
        self._staged = write

    async def write(self) -> bool:
        staged, self._staged = self._staged, None
        assert staged is not None, "nothing staged"
        return await staged.run(self.connection, self.tables.schema)


# The event a check answered with, as the store keeps it.
_ANSWER = StockNoDisponible(order_id=str(uuid.UUID(int=7)), reason="stock insuficiente",
                            unavailable=(Shortage(sku="A-1", requested=2, available=0),))


def _units(read: ValidationRead) -> tuple[AllocationStatus | None, dict[str, int]]:
    """The allocation and the units on hand of a validation read (its prices aside)."""
    return read.allocation, read.on_hand


def _on_probe(conn: AsyncConnection) -> tuple[StockRepository, _OnProbe]:
    uow = _OnProbe(conn)
    return StockRepository(uow), uow  # type: ignore[arg-type]


async def _state(repo: StockRepository, saga_id: str) -> AllocationState:
    """The allocation's read, as its handler makes it (the rest of the probe's transaction
    gets inventario's allocation timeout)."""
    return await repo.allocation_state(saga_id, statement_timeout_ms=int(
        InventarioSettings().allocation_statement_timeout_s * 1000))


async def test_the_validation_read_answers_both_questions_in_one_statement(
        running_stack: None) -> None:
    known, other, absent = new_sku(), new_sku(), new_sku()
    fresh, cancelled = f"probe-{uuid.uuid4()}", f"probe-{uuid.uuid4()}"
    async with db.probe() as conn:
        await conn.execute(text(
            "INSERT INTO inventario.products (sku, quantity) VALUES (:a, 7), (:b, 0)"),
            {"a": known, "b": other})
        repo, _ = _on_probe(conn)
        assert await repo.insert_allocation(cancelled, None, AllocationStatus.BLOCKED,
                                            [Line(known, 1)])

        assert _units(await repo.validation_read(fresh, [known, other, absent])) == (
            None, {known: 7, other: 0})
        assert _units(await repo.validation_read(cancelled, [known])) == (
            AllocationStatus.BLOCKED, {known: 7})
        # None of the products exists: still one answer, with the allocation status.
        assert _units(await repo.validation_read(cancelled, [absent])) == (
            AllocationStatus.BLOCKED, {})
        assert _units(await repo.validation_read(fresh, [absent])) == (None, {})


async def test_the_validation_read_gives_the_catalog_prices_of_priced_products(
        running_stack: None) -> None:
    priced, unpriced, absent = new_sku(), new_sku(), new_sku()
    async with db.probe() as conn:
        await conn.execute(text(
            "INSERT INTO inventario.products (sku, quantity, price, currency) "
            "VALUES (:a, 7, 50.00, 'USD'), (:b, 3, NULL, NULL)"), {"a": priced, "b": unpriced})
        repo, _ = _on_probe(conn)
        read = await repo.validation_read(f"probe-{uuid.uuid4()}", [priced, unpriced, absent])
        assert read.on_hand == {priced: 7, unpriced: 3}
        assert read.prices == {priced: Money(Decimal("50.00"), "USD")}
        await repo.set_product(unpriced, 4, Money(Decimal("1000"), "CLP"))
        await repo.set_product(priced, 6, None)  # no price given: the price is kept
        now_priced, kept = await repo.product(unpriced), await repo.product(priced)
        assert now_priced is not None and now_priced.price == Money(Decimal("1000"), "CLP")
        assert kept is not None and (kept.quantity, kept.price) == (
            6, Money(Decimal("50.00"), "USD"))


async def test_a_saga_is_checked_once_and_its_check_keeps_the_answer_it_sent(
        running_stack: None) -> None:
    """The validation read finds the saga's check with the event it answered (what a retry
    or a replay is answered with again), and a second check of the saga writes nothing: its
    guard finds the first."""
    saga_id, sku = f"probe-{uuid.uuid4()}", new_sku()
    async with db.probe() as conn:
        repo, uow = _on_probe(conn)
        assert (await repo.validation_read(saga_id, [sku])).check is None
        repo.record_check(saga_id, str(uuid.uuid4()), [Line(sku, 2)], "unavailable",
                          payment_requested=None, answer=_ANSWER)
        assert await uow.write()
        assert (await repo.validation_read(saga_id, [sku])).check == RecordedCheck(
            "unavailable", _ANSWER)
        repo.record_check(saga_id, str(uuid.uuid4()), [Line(sku, 1)], "verified",
                          payment_requested=Money(Decimal("2.00"), "EUR"), answer=_ANSWER)
        assert not await uow.write(), "the guard let a second check of the saga in"
        assert (await repo.validation_read(saga_id, [sku])).check == RecordedCheck(
            "unavailable", _ANSWER)


async def test_the_allocation_state_is_read_in_one_statement_without_locks(
        running_stack: None) -> None:
    checked, never, unavailable, allocated = (f"probe-{uuid.uuid4()}" for _ in range(4))
    a, b, absent, other = new_sku(), new_sku(), new_sku(), new_sku()
    await db.execute("INSERT INTO inventario.products (sku, quantity) VALUES ($1, 4), ($2, 9), "
                     "($3, 1)", a, b, other)
    async with db.probe() as conn:
        repo, uow = _on_probe(conn)
        repo.record_check(checked, str(uuid.uuid4()),
                          [Line(b, 2), Line(a, 1), Line(absent, 1), Line(b, 1)], "verified",
                          payment_requested=Money(Decimal("1234.5"), "PEN"), answer=_ANSWER)
        assert await uow.write()
        assert await _state(repo, checked) == AllocationState(
            checked=[Line(b, 2), Line(a, 1), Line(absent, 1), Line(b, 1)],
            payment_requested=Money(Decimal("1234.50"), "PEN"), allocation=None,
            on_hand={a: 4, b: 9})
        # The read locks nothing: a concurrent allocation may take the units meanwhile, which
        # the allocation's write checks under its locks.
        async with row_locked("SELECT 1 FROM inventario.products WHERE sku = ANY($1) "
                              "FOR UPDATE NOWAIT", [a, b]):
            pass
        assert await _state(repo, never) == AllocationState(
            checked=None, payment_requested=None, allocation=None, on_hand={})
        # A check that asked for no payment (stock unavailable) has its lines and no payment.
        repo.record_check(unavailable, str(uuid.uuid4()), [Line(a, 9)], "unavailable",
                          payment_requested=None, answer=_ANSWER)
        assert await uow.write()
        assert await _state(repo, unavailable) == AllocationState(
            checked=[Line(a, 9)], payment_requested=None, allocation=None, on_hand={a: 4})
        # A saga that has its allocation already: no product is read.
        repo.record_check(allocated, str(uuid.uuid4()), [Line(other, 1)], "verified",
                          payment_requested=Money(Decimal("3.00"), "USD"), answer=_ANSWER)
        assert await uow.write()
        assert await repo.insert_allocation(allocated, None, AllocationStatus.RELEASED,
                                            [Line(other, 1)])
        assert await _state(repo, allocated) == AllocationState(
            checked=[Line(other, 1)], payment_requested=Money(Decimal("3.00"), "USD"),
            allocation=AllocationStatus.RELEASED, on_hand={})


async def test_the_allocations_lock_timeout_binds_the_locks_of_its_own_statement(
        running_stack: None) -> None:
    sku, saga_id = new_sku(), f"probe-{uuid.uuid4()}"
    await db.execute("INSERT INTO inventario.products (sku, quantity) VALUES ($1, 3)", sku)
    async with row_locked("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE", sku):
        async with db.probe() as conn:
            repo, uow = _on_probe(conn)
            repo.record_allocation(saga_id, str(uuid.uuid4()), AllocationStatus.ALLOCATED,
                                   [Line(sku, 1)], lock_timeout_ms=200)
            started = time.monotonic()
            # Without its own timeout the statement would wait for the lock for as long as the
            # other transaction holds it (the bound here only keeps a failure from hanging).
            with pytest.raises(Exception) as failure:
                await asyncio.wait_for(uow.write(), 10)
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
        repo, uow = _on_probe(conn)
        # Two lines of one SKU count together.
        lines = [Line(a, 2), Line(b, 5), Line(a, 3)]
        repo.record_allocation(saga_id, order_id, AllocationStatus.ALLOCATED, lines,
                               lock_timeout_ms=1000)
        assert await uow.write()
        assert _units(await repo.validation_read(saga_id, [a, b, untouched])) == (
            AllocationStatus.ALLOCATED, {a: 5, b: 0, untouched: 3})
        # The saga's allocation was recorded already: nothing recorded, nothing taken.
        repo.record_allocation(saga_id, order_id, AllocationStatus.ALLOCATED,
                               [Line(untouched, 1)], lock_timeout_ms=1000)
        assert not await uow.write()
        assert _units(await repo.validation_read(saga_id, [untouched])) == (
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
        repo, uow = _on_probe(conn)
        repo.record_allocation(saga_id, str(uuid.uuid4()), AllocationStatus.FAILED,
                               [Line(sku, 2)], lock_timeout_ms=1000)
        assert await uow.write()
        assert _units(await repo.validation_read(saga_id, [sku])) == (
            AllocationStatus.FAILED, {sku: 1})


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
        repo, uow = _on_probe(conn)
        # Decided ALLOCATED on 2 units read; 1 is left.
        repo.record_allocation(taken, str(uuid.uuid4()), AllocationStatus.ALLOCATED,
                               [Line(sku, 2)], lock_timeout_ms=1000)
        assert not await uow.write()
        # Decided FAILED on none read; 1 is there again.
        repo.record_allocation(put_back, str(uuid.uuid4()), AllocationStatus.FAILED,
                               [Line(sku, 1)], lock_timeout_ms=1000)
        assert not await uow.write()
        # A product that does not exist has no units.
        repo.record_allocation(unknown, str(uuid.uuid4()), AllocationStatus.ALLOCATED,
                               [Line(sku, 1), Line(absent, 1)], lock_timeout_ms=1000)
        assert not await uow.write()
        for saga_id in (taken, put_back, unknown):
            assert _units(await repo.validation_read(saga_id, [sku])) == (None, {sku: 1})


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
        repo, uow = _on_probe(conn)
        seq_before, idx_before = await _product_scans(conn)

        assert _units(await repo.validation_read(saga_id, [a, b])) == (None, {a: 10, b: 10})
        repo.record_check(saga_id, order_id, lines, "verified",
                          payment_requested=Money(Decimal("10.00"), "USD"), answer=_ANSWER)
        assert await uow.write()
        state = await _state(repo, saga_id)
        assert state.on_hand == {a: 10, b: 10}
        repo.record_allocation(saga_id, order_id, AllocationStatus.ALLOCATED, lines,
                               lock_timeout_ms=1000)
        assert await uow.write()
        assert _units(await repo.validation_read(saga_id, [a, b])) == (
            AllocationStatus.ALLOCATED, {a: 7, b: 9})

        seq_after, idx_after = await _product_scans(conn)
        assert seq_after == seq_before, "a step scanned the whole catalogue"
        assert idx_after > idx_before


async def _rows_read(conn: AsyncConnection) -> dict[str, int]:
    """Rows of inventario's stock_checks and allocations this transaction has read so far,
    by sequential and index scans."""
    rows = (await conn.execute(text(
        "SELECT relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
        "FROM pg_stat_xact_user_tables WHERE schemaname = 'inventario' "
        "AND relname IN ('stock_checks', 'allocations')"))).all()
    return {str(r[0]): int(r[1]) for r in rows}


async def test_the_orders_in_flight_of_an_auto_product_are_found_by_product(
        running_stack: None) -> None:
    """An ``auto`` order asks for its products' orders in flight twice (its read, and its
    commit statement under the products' lock). A window of the whole catalogue's checks
    holds thousands at a steady rate, and allocations keep every saga ever allocated: a
    count that read them all would cost every ``auto`` order more with every order of any
    product, and it did: 4 to 9 ms a call after a few minutes of load, twice per order, where
    a Check-Then-Pay check takes 0.4 ms; and 20 ms when statistics taken before the last
    minutes' checks made the window look empty and it was read through its time index. It
    reads the product's own checks, and their allocations by key."""
    sku, tag = new_sku(), uuid.uuid4().hex[:8]
    saga_id = f"probe-{uuid.uuid4()}"
    async with db.probe() as conn:
        await conn.execute(text(
            "INSERT INTO inventario.products (sku, quantity, allocation_strategy) "
            "VALUES (:s, 1000, 'auto')"), {"s": sku})
        # Other products' checks, most of them allocated since; moved into the window after
        # the statistics were taken, as checks of the last minutes are under load.
        await conn.execute(text(
            "INSERT INTO inventario.stock_checks (saga_id, order_id, items, result, checked_at) "
            "SELECT 'crowd-' || :tag || '-' || g, gen_random_uuid(), "
            "       jsonb_build_array(jsonb_build_object("
            "           'sku', 'CROWD-' || :tag || '-' || g % 50, 'quantity', 1)), 'verified', "
            "       now() - interval '1 hour' "
            "FROM generate_series(1, 3000) AS g"), {"tag": tag})
        await conn.execute(text(
            "INSERT INTO inventario.allocations (saga_id, status, items) "
            "SELECT saga_id, 'ALLOCATED', items FROM inventario.stock_checks "
            "WHERE saga_id LIKE 'crowd-' || :tag || '-%' AND right(saga_id, 1) <> '0'"),
            {"tag": tag})
        # The product's own: two in flight (one beside another product's line), one allocated,
        # one older than the window, one turned away.
        own = [(2, "verified", 0), (3, "verified", 0), (4, "verified", 0),
               (7, "verified", 300), (9, "unavailable", 0)]
        for n, (units, result, age) in enumerate(own):
            await conn.execute(text(
                "INSERT INTO inventario.stock_checks (saga_id, order_id, items, result, "
                "checked_at) VALUES (:k, gen_random_uuid(), CAST(:items AS jsonb), :r, "
                "now() - make_interval(secs => :age))"),
                {"k": f"own-{tag}-{n}", "r": result, "age": age, "items": json.dumps(
                    [{"sku": sku, "quantity": units}]
                    + ([{"sku": f"CROWD-{tag}-1", "quantity": 5}] if n == 1 else []))})
        await conn.execute(text(
            "INSERT INTO inventario.allocations (saga_id, status, items) "
            "VALUES (:k, 'ALLOCATED', '[]')"), {"k": f"own-{tag}-2"})
        await conn.execute(text("ANALYZE inventario.stock_checks, inventario.allocations"))
        await conn.execute(text(
            "UPDATE inventario.stock_checks SET checked_at = now() "
            "WHERE saga_id LIKE 'crowd-' || :tag || '-%'"), {"tag": tag})
        repo, _ = _on_probe(conn)
        before = await _rows_read(conn)

        # A window of a second, past the statistics' last check: they make it nearly empty,
        # as they make the last two minutes under load.
        read = await repo.validation_read(saga_id, [sku], in_flight_window_s=1)

        after = await _rows_read(conn)
        assert read.in_flight == {sku: 5}
        read_rows = {t: after.get(t, 0) - before.get(t, 0) for t in after}
        assert all(n <= 10 for n in read_rows.values()), (
            f"rows read to count one product's orders in flight: {read_rows}")


SCRATCH = "inventariotest"
async def test_a_validation_and_an_allocation_run_whole_on_a_copy_of_the_tables(
        running_stack: None) -> None:
    """Each statement of the two steps names its tables the way the copy's engine and unit of
    work rename them (the allocation's read, written as text, with the unit of work's schema):
    the stock is checked and taken in the copy, and inventario's own tables never see the
    saga."""
    sku, saga_id, order_id = new_sku(), f"probe-{uuid.uuid4()}", str(uuid.uuid4())
    async with scratch_copy(SCRATCH) as (engine, tables):
        await add_product(engine, SCRATCH, sku, 5)
        placed, paid = _checked_then_paid(saga_id, order_id, sku)
        assert await deliver(engine, tables, make_on_orden_solicitada(InventarioSettings()),
                              placed)
        assert await deliver(engine, tables, make_on_pago_exitoso(InventarioSettings()), paid)

        async with engine.connect() as conn:
            assert (await conn.execute(text(
                f"SELECT quantity FROM {SCRATCH}.products WHERE sku = :s"), {"s": sku})
            ).scalar_one() == 3
            assert (await conn.execute(text(
                f"SELECT status FROM {SCRATCH}.allocations WHERE saga_id = :s"), {"s": saga_id})
            ).scalar_one() == AllocationStatus.ALLOCATED.value
            assert (await conn.execute(text(
                f"SELECT array_agg(event_type ORDER BY id) FROM {SCRATCH}.outbox "
                "WHERE saga_id = :s"), {"s": saga_id})
            ).scalar_one() == ["StockVerificado", "StockAsignado"]
    for table in ("stock_checks", "allocations"):
        assert await db.fetchval(
            f"SELECT count(*) FROM inventario.{table} WHERE saga_id = $1", saga_id) == 0
    assert await db.fetchval("SELECT count(*) FROM inventario.products WHERE sku = $1", sku) == 0


async def test_a_payment_the_check_did_not_ask_for_records_only_its_message(
        running_stack: None) -> None:
    """The stock check keeps what it asked pagos for; a PagoExitoso of another amount takes
    nothing and writes no allocation and no event: only its inbox row, as processed."""
    sku, saga_id, order_id = new_sku(), f"probe-{uuid.uuid4()}", str(uuid.uuid4())
    async with scratch_copy(SCRATCH) as (engine, tables):
        await add_product(engine, SCRATCH, sku, 5)
        placed, _ = _checked_then_paid(saga_id, order_id, sku)
        assert await deliver(engine, tables, make_on_orden_solicitada(InventarioSettings()),
                              placed)
        foreign = pago_exitoso(saga_id, order_id, amount="9.99", currency="USD")
        assert await deliver(engine, tables, make_on_pago_exitoso(InventarioSettings()),
                              foreign)

        async with engine.connect() as conn:
            check = (await conn.execute(text(
                f"SELECT payment_amount, payment_currency FROM {SCRATCH}.stock_checks "
                "WHERE saga_id = :s"), {"s": saga_id})).one()
            assert (check.payment_amount, check.payment_currency) == (Decimal("10.00"), "USD")
            assert (await conn.execute(text(
                f"SELECT quantity FROM {SCRATCH}.products WHERE sku = :s"), {"s": sku})
            ).scalar_one() == 5
            assert (await conn.execute(text(
                f"SELECT count(*) FROM {SCRATCH}.allocations WHERE saga_id = :s"),
                {"s": saga_id})).scalar_one() == 0
            assert (await conn.execute(text(
                f"SELECT array_agg(event_type ORDER BY id) FROM {SCRATCH}.outbox "
                "WHERE saga_id = :s"), {"s": saga_id})
            ).scalar_one() == ["StockVerificado"]
            assert (await conn.execute(text(
                f"SELECT status FROM {SCRATCH}.processed_messages WHERE message_id = :m"),
                {"m": foreign.message_id})).scalar_one() == "processed"


def _checked_then_paid(saga_id: str, order_id: str, sku: str
                       ) -> tuple[Message[OrdenSolicitada], Message[PagoExitoso]]:
    """An order of two units of ``sku`` at 5.00 USD, and its payment."""
    placed = orden_solicitada((sku, 2), saga_id=saga_id, order_id=order_id, price="5.00",
                              currency="USD", payment_method={
                                  "type": "credit_card", "token": sealing.sealed(
                                      "tok_visa", sealing.charge(saga_id=saga_id,
                                                                 order_id=order_id,
                                                                 customer_id="c-1"))})
    paid = pago_exitoso(saga_id, order_id, amount="10.00", currency="USD")
    return placed, paid


@contextlib.asynccontextmanager
async def _as_inventario(monkeypatch: pytest.MonkeyPatch, lock_timeout_s: float,
                         statement_timeout_s: float
                         ) -> AsyncIterator[tuple[AsyncEngine, MessagingTables, str,
                                                  InventarioSettings]]:
    """A copy of the tables with a product of 5 units checked for a saga (returned), and an
    engine whose connections have inventario's settings (``inventario.app``) for these
    timeouts, on the copy: its statement timeout on every connection."""
    monkeypatch.setenv("INVENTARIO_LOCK_TIMEOUT_S", str(lock_timeout_s))
    monkeypatch.setenv("INVENTARIO_STATEMENT_TIMEOUT_S", str(statement_timeout_s))
    sku = new_sku()
    async with scratch_copy(SCRATCH) as (plain, tables):
        await add_product(plain, SCRATCH, sku, 5)
        engine = create_async_engine(
            config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://"),
            connect_args={"server_settings": database_settings()})
        try:
            yield (engine.execution_options(schema_translate_map={"inventario": SCRATCH}),
                   tables, sku, InventarioSettings())
        finally:
            await engine.dispose()


async def _lock_waited_s() -> float:
    """How long the allocation's commit statement (on the copy) has waited for a lock."""
    waited = await db.fetchval(
        "SELECT max(extract(epoch FROM clock_timestamp() - query_start)) "
        "FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE '%alloc_timeout%' AND query LIKE $1", f'%"{SCRATCH}"%')
    return float(waited or 0)


async def test_the_allocation_waits_for_a_lock_past_the_statement_timeout_to_the_lock_timeout(
        running_stack: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The product is held locked longer than a statement may take (0.5 s here, 5 s by
    default), less than a lock may be waited for (3 s here, 10 s): the allocation waits, and
    takes the units once the lock is let go (ADR 0001's lock timeout applies)."""
    saga_id, order_id = f"probe-{uuid.uuid4()}", str(uuid.uuid4())
    async with _as_inventario(monkeypatch, 3.0, 0.5) as (engine, tables, sku, settings):
        placed, paid = _checked_then_paid(saga_id, order_id, sku)
        assert await deliver(engine, tables, make_on_orden_solicitada(InventarioSettings()),
                              placed)
        async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE",
                              sku):
            allocation = asyncio.create_task(
                deliver(engine, tables, make_on_pago_exitoso(settings), paid))
            await wait_for(_lock_waited_s, lambda waited: allocation.done() or waited > 1.0,
                           timeout=10, what="the allocation waiting for the lock for 1 s")
            if allocation.done():
                await allocation  # what ended the wait before the lock timeout
        assert await asyncio.wait_for(allocation, 10), "allocated once the lock was let go"
        async with engine.connect() as conn:
            assert (await conn.execute(text(
                f"SELECT quantity FROM {SCRATCH}.products WHERE sku = :s"), {"s": sku})
            ).scalar_one() == 3


async def test_a_lock_held_past_the_lock_timeout_ends_the_allocation_at_the_lock_timeout(
        running_stack: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Held for longer than the lock timeout (1 s here), the lock is what the allocation gives
    up on (SQLSTATE 55P03, retried by the consumer), at the lock timeout; never the statement
    timeout (0.5 s here) first."""
    saga_id, order_id = f"probe-{uuid.uuid4()}", str(uuid.uuid4())
    async with _as_inventario(monkeypatch, 1.0, 0.5) as (engine, tables, sku, settings):
        placed, paid = _checked_then_paid(saga_id, order_id, sku)
        assert await deliver(engine, tables, make_on_orden_solicitada(InventarioSettings()),
                              placed)
        async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE",
                              sku):
            started = time.monotonic()
            with pytest.raises(Exception) as failure:
                await asyncio.wait_for(
                    deliver(engine, tables, make_on_pago_exitoso(settings), paid), 10)
            gave_up_after = time.monotonic() - started
        assert sqlstate(failure.value) == "55P03", repr(failure.value)
        assert 1.0 <= gave_up_after < 1.5, gave_up_after
