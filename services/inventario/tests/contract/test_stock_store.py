"""``StockStore``'s contract (inventario.usecases.ports), run on the in-memory fake and on
``StockRepository`` over PostgreSQL: reads without locks, the stock check and the allocation
recorded with the commit (a second check of the saga writes nothing, the first and its
answer kept; the allocation only if the products' units
still agree with it and the saga has none, else nothing of the unit, events included, and
``commit`` returns False), a block that loses to an allocation, a release that puts units
back."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line
from inventario.usecases.ports import RecordedCheck
from saga_contracts.events.inventory import Shortage, StockNoDisponible
from saga_harness.events import stock_asignado

from .backends import StockBackend

A = AllocationStatus
PRICE = Money(Decimal("5.00"), "USD")
PAYMENT = Money(Decimal("15.00"), "USD")


def _answer(order_id: str, sku: str = "A-1") -> StockNoDisponible:
    """An event a check answers with."""
    return StockNoDisponible(order_id=order_id, reason="stock insuficiente",
                             unavailable=(Shortage(sku=sku, requested=9, available=5),))


def _ids() -> tuple[str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4())


async def _products(stock: StockBackend, **on_hand: int) -> dict[str, str]:
    """Products with ``on_hand`` units (each name made unique), at ``PRICE``; their SKUs."""
    skus = {name: f"{name}-{uuid.uuid4()}" for name in on_hand}
    async with stock.unit() as (uow, products):
        for name, quantity in on_hand.items():
            await products.set_product(skus[name], quantity, PRICE)
        assert await uow.commit()
    return skus


async def _checked(stock: StockBackend, saga_id: str, order_id: str, lines: list[Line],
                   payment: Money | None = PAYMENT) -> None:
    async with stock.unit() as (uow, store):
        store.record_check(saga_id, order_id, lines, "VERIFIED", payment, _answer(order_id))
        assert await uow.commit()


async def _allocate(stock: StockBackend, saga_id: str, order_id: str, status: AllocationStatus,
                    lines: list[Line]) -> bool:
    async with stock.unit() as (uow, store):
        await store.allocation_state(saga_id, statement_timeout_ms=5000)
        store.record_allocation(saga_id, order_id, status, lines, lock_timeout_ms=2000)
        return await uow.commit()


async def _allocation(stock: StockBackend, saga_id: str
                      ) -> tuple[AllocationStatus, list[Line]] | None:
    async with stock.unit() as (_, store):
        return await store.lock_allocation(saga_id)


async def _on_hand(stock: StockBackend, *skus: str) -> dict[str, int]:
    async with stock.unit() as (_, store):
        return (await store.validation_read(str(uuid.uuid4()), list(skus))).on_hand


async def test_the_validation_read_answers_allocation_units_and_prices(
        stock: StockBackend) -> None:
    skus = await _products(stock, a=3, b=0)
    unpriced = f"u-{uuid.uuid4()}"
    async with stock.unit() as (uow, products):
        await products.set_product(unpriced, 2, None)
        assert await uow.commit()
    saga_id, order_id = _ids()
    async with stock.unit() as (_, store):
        read = await store.validation_read(saga_id, [skus["a"], skus["b"], unpriced,
                                                     f"absent-{uuid.uuid4()}"])
    assert read.allocation is None
    assert read.on_hand == {skus["a"]: 3, skus["b"]: 0, unpriced: 2}
    assert read.prices == {skus["a"]: PRICE, skus["b"]: PRICE}

    async with stock.unit() as (uow, store):
        assert await store.block(saga_id, order_id)
        assert await uow.commit()
    async with stock.unit() as (_, store):
        assert (await store.validation_read(saga_id, [])).allocation is A.BLOCKED


async def test_the_first_stock_check_is_kept_with_its_answer_and_shows_with_its_commit(
        stock: StockBackend) -> None:
    skus = await _products(stock, a=5)
    saga_id, order_id = _ids()
    lines = [Line(skus["a"], 2)]
    first = _answer(order_id, skus["a"])
    async with stock.unit() as (uow, store):
        store.record_check(saga_id, order_id, lines, "VERIFIED", PAYMENT, first)
        async with stock.unit() as (_, elsewhere):
            unseen = await elsewhere.allocation_state(saga_id, statement_timeout_ms=5000)
            assert (unseen.checked, unseen.payment_requested) == (None, None)
        assert await uow.commit()
    async with stock.unit() as (uow, store):
        store.record_check(saga_id, order_id, [Line(skus["a"], 9)], "NO_STOCK", None,
                           _answer(order_id))
        uow.emit(stock_asignado(saga_id, order_id).payload, saga_id=saga_id)
        assert not await uow.commit(), "a second check of the saga went in"
    assert await stock.outbox(saga_id) == [], "a unit whose check was refused wrote its events"
    async with stock.unit() as (_, store):
        state = await store.allocation_state(saga_id, statement_timeout_ms=5000)
        check = (await store.validation_read(saga_id, [])).check
    assert (state.checked, state.payment_requested, state.allocation, state.on_hand) == (
        lines, PAYMENT, None, {skus["a"]: 5})
    assert check == RecordedCheck("VERIFIED", first)


async def test_an_allocation_takes_every_lines_units_once(stock: StockBackend) -> None:
    skus = await _products(stock, a=5, b=2)
    saga_id, order_id = _ids()
    lines = [Line(skus["a"], 2), Line(skus["b"], 1), Line(skus["a"], 1)]
    await _checked(stock, saga_id, order_id, lines)
    async with stock.unit() as (uow, store):
        await store.allocation_state(saga_id, statement_timeout_ms=5000)
        store.record_allocation(saga_id, order_id, A.ALLOCATED, lines, lock_timeout_ms=2000)
        uow.emit(stock_asignado(saga_id, order_id).payload, saga_id=saga_id)
        assert await uow.commit()
    assert await _on_hand(stock, skus["a"], skus["b"]) == {skus["a"]: 2, skus["b"]: 1}
    assert await stock.outbox(saga_id) == ["StockAsignado"]
    async with stock.unit() as (_, store):
        state = await store.allocation_state(saga_id, statement_timeout_ms=5000)
        assert (state.allocation, state.on_hand) == (A.ALLOCATED, {})
        assert await store.lock_allocation(saga_id) == (A.ALLOCATED, lines)

    # Again (a redelivery that read before the first committed): nothing, events included.
    async with stock.unit() as (uow, store):
        store.record_allocation(saga_id, order_id, A.ALLOCATED, lines, lock_timeout_ms=2000)
        uow.emit(stock_asignado(saga_id, order_id).payload, saga_id=saga_id)
        assert not await uow.commit()
    assert await _on_hand(stock, skus["a"], skus["b"]) == {skus["a"]: 2, skus["b"]: 1}
    assert await stock.outbox(saga_id) == ["StockAsignado"]


async def test_an_allocation_the_units_no_longer_agree_with_writes_nothing(
        stock: StockBackend) -> None:
    skus = await _products(stock, a=3)
    saga_id, order_id = _ids()
    lines = [Line(skus["a"], 3)]
    await _checked(stock, saga_id, order_id, lines)
    async with stock.unit() as (uow, store):
        state = await store.allocation_state(saga_id, statement_timeout_ms=5000)
        assert state.on_hand == {skus["a"]: 3}
        async with stock.unit() as (other, products):  # meanwhile, another order takes one
            await products.set_product(skus["a"], 2, None)
            assert await other.commit()
        store.record_allocation(saga_id, order_id, A.ALLOCATED, lines, lock_timeout_ms=2000)
        uow.emit(stock_asignado(saga_id, order_id).payload, saga_id=saga_id)
        assert not await uow.commit()
    assert await _on_hand(stock, skus["a"]) == {skus["a"]: 2}
    assert await stock.outbox(saga_id) == []
    assert await _allocation(stock, saga_id) is None

    # A FAILED allocation stands only while some line is short: it takes nothing.
    assert await _allocate(stock, saga_id, order_id, A.FAILED, lines)
    assert await _on_hand(stock, skus["a"]) == {skus["a"]: 2}
    assert await _allocation(stock, saga_id) == (A.FAILED, lines)


async def test_a_failed_allocation_the_units_would_cover_writes_nothing(
        stock: StockBackend) -> None:
    skus = await _products(stock, a=3)
    saga_id, order_id = _ids()
    assert not await _allocate(stock, saga_id, order_id, A.FAILED, [Line(skus["a"], 3)])
    assert await _allocation(stock, saga_id) is None


async def test_an_allocation_loses_to_a_block_recorded_meanwhile(stock: StockBackend) -> None:
    skus = await _products(stock, a=3)
    saga_id, order_id = _ids()
    lines = [Line(skus["a"], 1)]
    await _checked(stock, saga_id, order_id, lines)
    async with stock.unit() as (uow, store):
        await store.allocation_state(saga_id, statement_timeout_ms=5000)
        async with stock.unit() as (other, elsewhere):
            assert await elsewhere.block(saga_id, order_id)
            assert await other.commit()
        store.record_allocation(saga_id, order_id, A.ALLOCATED, lines, lock_timeout_ms=2000)
        assert not await uow.commit()
    assert await _on_hand(stock, skus["a"]) == {skus["a"]: 3}
    assert await _allocation(stock, saga_id) == (A.BLOCKED, [])


async def test_a_block_loses_to_an_allocation_recorded_first(stock: StockBackend) -> None:
    skus = await _products(stock, a=3)
    saga_id, order_id = _ids()
    lines = [Line(skus["a"], 1)]
    await _checked(stock, saga_id, order_id, lines)
    assert await _allocate(stock, saga_id, order_id, A.ALLOCATED, lines)
    async with stock.unit() as (uow, store):
        assert not await store.block(saga_id, order_id)
        assert await uow.commit()
    assert await _allocation(stock, saga_id) == (A.ALLOCATED, lines)


async def test_a_release_puts_the_units_back_once(stock: StockBackend) -> None:
    skus = await _products(stock, a=3, b=1)
    saga_id, order_id = _ids()
    lines = [Line(skus["a"], 2), Line(skus["b"], 1)]
    await _checked(stock, saga_id, order_id, lines)
    assert await _allocate(stock, saga_id, order_id, A.ALLOCATED, lines)
    await stock.delete_product(skus["b"])
    async with stock.unit() as (uow, store):
        locked = await store.lock_allocation(saga_id)
        assert locked == (A.ALLOCATED, lines)
        await store.release(saga_id, locked[1])
        assert await uow.commit()
    # A product deleted meanwhile comes back with its units.
    assert await _on_hand(stock, skus["a"], skus["b"]) == {skus["a"]: 3, skus["b"]: 1}
    assert await _allocation(stock, saga_id) == (A.RELEASED, lines)


async def test_a_release_in_a_unit_that_never_commits_writes_nothing(
        stock: StockBackend) -> None:
    skus = await _products(stock, a=3)
    saga_id, order_id = _ids()
    lines = [Line(skus["a"], 2)]
    await _checked(stock, saga_id, order_id, lines)
    assert await _allocate(stock, saga_id, order_id, A.ALLOCATED, lines)
    async with stock.unit() as (_, store):
        await store.release(saga_id, lines)
    assert await _on_hand(stock, skus["a"]) == {skus["a"]: 1}
    assert await _allocation(stock, saga_id) == (A.ALLOCATED, lines)


async def test_an_allocation_locked_is_released_once_by_two_cancellations(
        stock: StockBackend) -> None:
    """A second cancellation's lock waits for the first's unit of work to end, and finds the
    allocation released: its units go back once."""
    skus = await _products(stock, a=3)
    saga_id, order_id = _ids()
    lines = [Line(skus["a"], 2)]
    await _checked(stock, saga_id, order_id, lines)
    assert await _allocate(stock, saga_id, order_id, A.ALLOCATED, lines)

    async def second() -> tuple[AllocationStatus, list[Line]] | None:
        async with stock.unit() as (uow, store):
            found = await store.lock_allocation(saga_id)
            if found is not None and found[0] is A.ALLOCATED:
                await store.release(saga_id, found[1])
            assert await uow.commit()
            return found

    async with stock.unit() as (uow, store):
        assert await store.lock_allocation(saga_id) == (A.ALLOCATED, lines)
        waiting = asyncio.create_task(second())
        await stock.until_waiting_for_a_lock()
        await store.release(saga_id, lines)
        assert await uow.commit()
    assert await waiting == (A.RELEASED, lines)
    assert await _on_hand(stock, skus["a"]) == {skus["a"]: 3}
