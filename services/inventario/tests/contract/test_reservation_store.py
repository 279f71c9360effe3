"""The reservations' part of ``StockStore``, ``ProductStore`` and ``ReservationDeadlines``
(inventario.usecases.ports), run on the in-memory fake and on PostgreSQL: a reserving check holds
the lines' units for its saga until its deadline (others' reads see them held, its own does not),
and writes nothing when the units are no longer there or the saga was checked; an allocation
confirms the saga's live reservation and cannot take units another saga holds; a release
changes a reservation once; a reservation past its deadline holds nothing, is not confirmed,
and is marked EXPIRED once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from inventario.domain.allocation_strategy import AllocationStrategy
from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line
from saga_contracts.events.inventory import Shortage, StockNoDisponible

from .backends import StockBackend

A = AllocationStatus
PRICE = Money(Decimal("5.00"), "USD")
PAYMENT = Money(Decimal("10.00"), "USD")


def _answer(order_id: str) -> StockNoDisponible:
    return StockNoDisponible(order_id=order_id, reason="stock insuficiente",
                             unavailable=(Shortage(sku="A-1", requested=9, available=5),))


def _ids() -> tuple[str, str]:
    return f"saga-{uuid.uuid4()}", str(uuid.uuid4())


async def _product(stock: StockBackend, units: int,
                   strategy: AllocationStrategy | None = AllocationStrategy.RESERVE_THEN_PAY
                   ) -> str:
    sku = f"R-{uuid.uuid4()}"
    async with stock.unit() as (uow, products):
        await products.set_product(sku, units, PRICE, strategy)
        assert await uow.commit()
    return sku


async def _reserve(stock: StockBackend, saga_id: str, order_id: str, lines: list[Line],
                   expires_in_s: float = 120.0) -> bool:
    async with stock.unit() as (uow, store):
        store.record_reserving_check(saga_id, order_id, lines, PAYMENT, _answer(order_id),
                                     expires_at=datetime.now(UTC)
                                     + timedelta(seconds=expires_in_s))
        return await uow.commit()


async def _allocate(stock: StockBackend, saga_id: str, order_id: str, status: AllocationStatus,
                    lines: list[Line]) -> bool:
    async with stock.unit() as (uow, store):
        await store.allocation_state(saga_id, statement_timeout_ms=5000)
        store.record_allocation(saga_id, order_id, status, lines, lock_timeout_ms=2000)
        return await uow.commit()


async def test_a_reservation_holds_the_units_for_its_saga_alone(stock: StockBackend) -> None:
    sku = await _product(stock, 5)
    saga_id, order_id = _ids()
    assert await _reserve(stock, saga_id, order_id, [Line(sku, 2), Line(sku, 1)])

    async with stock.unit() as (_, store):
        theirs = await store.validation_read(f"other-{uuid.uuid4()}", [sku])
        mine = await store.validation_read(saga_id, [sku])
        state = await store.allocation_state(saga_id, statement_timeout_ms=5000)
        product = await store.product(sku)
    assert (theirs.on_hand, theirs.reserved, theirs.available()) == ({sku: 5}, {sku: 3},
                                                                       {sku: 2})
    assert theirs.strategies == {sku: AllocationStrategy.RESERVE_THEN_PAY}
    assert theirs.now is not None
    assert (mine.reserved, mine.check is not None) == ({}, True)
    assert (state.checked, state.payment_requested, state.reservation_live) == (
        [Line(sku, 2), Line(sku, 1)], PAYMENT, True)
    assert product is not None
    assert (product.quantity, product.reserved, product.available,
            product.allocation_strategy) == (5, 3, 2, AllocationStrategy.RESERVE_THEN_PAY)


async def test_a_reservation_the_units_no_longer_cover_writes_nothing(
        stock: StockBackend) -> None:
    sku = await _product(stock, 3)
    first, second = _ids(), _ids()
    assert await _reserve(stock, *first, [Line(sku, 2)])
    assert not await _reserve(stock, *second, [Line(sku, 2)])
    assert not await _reserve(stock, *first, [Line(sku, 1)]), "a second check of the saga"
    async with stock.unit() as (_, store):
        read = await store.validation_read(second[0], [sku])
        assert read.check is None and read.reserved == {sku: 2}
    assert await _reserve(stock, *second, [Line(sku, 1)])  # the one unit left


async def test_an_allocation_confirms_the_live_reservation_and_takes_its_units(
        stock: StockBackend) -> None:
    sku = await _product(stock, 2)
    saga_id, order_id = _ids()
    assert await _reserve(stock, saga_id, order_id, [Line(sku, 2)])
    other = _ids()
    assert not await _allocate(stock, *other, A.ALLOCATED, [Line(sku, 1)]), \
        "an allocation took units another saga holds"
    assert await _allocate(stock, saga_id, order_id, A.ALLOCATED, [Line(sku, 2)])

    async with stock.unit() as (uow, store):
        state = await store.allocation_state(saga_id, statement_timeout_ms=5000)
        product = await store.product(sku)
        assert await store.release_reservation(saga_id) == 0, "a confirmed one was released"
        assert await uow.commit()
    assert (state.allocation, state.reservation_live) == (A.ALLOCATED, False)
    assert product is not None and (product.quantity, product.reserved) == (0, 0)


async def test_a_release_changes_a_reservation_once_and_frees_its_units(
        stock: StockBackend) -> None:
    sku = await _product(stock, 2)
    saga_id, order_id = _ids()
    assert await _reserve(stock, saga_id, order_id, [Line(sku, 2)])
    async with stock.unit() as (uow, store):
        assert await store.release_reservation(saga_id) == 1
        assert await uow.commit()
    async with stock.unit() as (uow, store):
        assert await store.release_reservation(saga_id) == 0
        assert await uow.commit()
    async with stock.unit() as (uow, store):
        assert await store.release_reservation(saga_id) == 0  # never committed: nothing
    assert await _allocate(stock, *_ids(), A.ALLOCATED, [Line(sku, 2)])


async def test_a_release_in_a_unit_that_never_commits_keeps_the_reservation(
        stock: StockBackend) -> None:
    sku = await _product(stock, 2)
    saga_id, order_id = _ids()
    assert await _reserve(stock, saga_id, order_id, [Line(sku, 2)])
    async with stock.unit() as (_, store):
        assert await store.release_reservation(saga_id) == 1
    async with stock.unit() as (_, store):
        assert (await store.allocation_state(saga_id, statement_timeout_ms=5000)
                ).reservation_live


async def test_a_reservation_past_its_deadline_holds_nothing_and_expires_once(
        stock: StockBackend) -> None:
    sku = await _product(stock, 2)
    saga_id, order_id = _ids()
    assert await _reserve(stock, saga_id, order_id, [Line(sku, 2)], expires_in_s=-1)
    async with stock.unit() as (_, store):
        assert (await store.validation_read(f"other-{uuid.uuid4()}", [sku])).reserved == {}
        assert not (await store.allocation_state(saga_id, statement_timeout_ms=5000)
                    ).reservation_live
    deadlines = stock.deadlines()
    expired = [r for r in await deadlines.expire_due(1000) if r.saga_id == saga_id]
    assert [(r.sku, r.quantity) for r in expired] == [(sku, 2)]
    assert [r for r in await deadlines.expire_due(1000) if r.saga_id == saga_id] == []
    async with stock.unit() as (uow, store):
        assert await store.release_reservation(saga_id) == 0  # expired: nothing to release
        assert await uow.commit()


async def test_the_next_deadline_is_the_earliest_live_one(stock: StockBackend) -> None:
    sku = await _product(stock, 10)
    assert await _reserve(stock, *_ids(), [Line(sku, 1)], expires_in_s=30)
    assert await _reserve(stock, *_ids(), [Line(sku, 1)], expires_in_s=3000)
    seconds = await stock.deadlines().seconds_to_next()
    assert seconds is not None and seconds <= 30


async def test_a_strategy_left_out_is_kept(stock: StockBackend) -> None:
    sku = await _product(stock, 1, AllocationStrategy.AUTO)
    async with stock.unit() as (uow, products):
        await products.set_product(sku, 4, None)
        assert await uow.commit()
    async with stock.unit() as (_, products):
        product = await products.product(sku)
    assert product is not None
    assert (product.quantity, product.allocation_strategy) == (4, AllocationStrategy.AUTO)


async def test_a_locked_product_shows_the_units_reserved(stock: StockBackend) -> None:
    """``lock_product``: the product with the units its live reservations hold (what a PUT
    must not go below); None for no product."""
    sku = await _product(stock, 5)
    assert await _reserve(stock, *_ids(), [Line(sku, 2)])
    async with stock.unit() as (uow, products):
        locked = await products.lock_product(sku)
        assert locked is not None and (locked.quantity, locked.reserved) == (5, 2)
        assert await products.lock_product(f"R-{uuid.uuid4()}") is None
        assert await uow.commit()


async def _check_plain(stock: StockBackend, saga_id: str, order_id: str, units: int,
                       sku: str) -> bool:
    """A verified check of an ``auto`` order that does not reserve, through its guard."""
    async with stock.unit() as (uow, store):
        store.record_auto_check(saga_id, order_id, [Line(sku, units)], PAYMENT,
                                _answer(order_id), ratio=0.5, in_flight_window_s=120.0)
        return await uow.commit()


async def test_auto_checks_without_reserving_only_while_the_rule_says_so(
        stock: StockBackend) -> None:
    """10 units under ``auto`` at ratio 0.5: checks of 2 and 2 units go in (0 + 2 and 2 + 2
    in flight, below 5); a third of 1 (4 + 1 ≥ 5) writes nothing. A reservation then holds
    at most the 6 units those orders in flight leave."""
    sku = await _product(stock, 10, AllocationStrategy.AUTO)
    assert await _check_plain(stock, *_ids(), 2, sku)
    assert await _check_plain(stock, *_ids(), 2, sku)
    assert not await _check_plain(stock, *_ids(), 1, sku)
    assert not await _reserve(stock, *_ids(), [Line(sku, 7)])
    assert await _reserve(stock, *_ids(), [Line(sku, 6)])
