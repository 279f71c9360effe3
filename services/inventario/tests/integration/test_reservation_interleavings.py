"""reserve_then_pay's forced interleavings on the real database: the handlers, each through a real
unit of work as the consumer runs it, on a copy of inventario's tables, the moment of each step
fixed by a lock the test holds (a barrier) or by the database clock passing a deadline.

- Two validations for the last units at once: both read them available, both wait for the
  product's lock at their commit; the first to get it reserves, the second's guard counts that
  reservation (read after the lock, though it committed after the second statement began) and
  writes nothing: handled again, it answers StockNoDisponible. Without the read after the lock
  both would hold the same units.
- A payment after the reservation's deadline, the expiry job not run yet, another saga holding
  the units: Check-Then-Pay's path, FalloAsignacion, nothing taken. The same after the job ran,
  the units still there: allocated, the reservation left EXPIRED.
- A cancellation during a reservation releases it once; the units go to the next order.
- A cancellation racing the confirmation: the confirmation waits for the product (held by the
  test), the cancellation blocks the saga and releases the reservation meanwhile; the
  confirmation then writes nothing, and handled again takes nothing.
- ``auto``: validations that read at once decide one after the other at their commit (the
  rule asked again under the product's lock), and a burst of forty orders for ten units loses
  no race; a product with ample stock reserves nothing.
- ``PUT /products/{sku}`` below the units reserved is refused, a reservation committed while
  it waited for the product's lock counted; a reservation waiting behind a lowered quantity
  reads the new one.
- A cancellation between a validation's read and its commit: the cancellation closes the
  saga's check; the validation's commit finds it and writes nothing (no reservation for a
  saga already ended), and handled again reads the saga blocked.
- A confirmation waiting for the product as its reservation's deadline passes: the expiry
  job leaves the row while its product is locked; the confirmation confirms it and counts it
  once (confirmed, never also expired).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from inventario.adapters.reservation_deadlines import ReservationDeadlineStore
from inventario.adapters.stock_repository import StockRepository
from inventario.config import InventarioSettings
from inventario.domain.allocation_strategy import AllocationStrategy
from inventario.entrypoints.messages import (
    make_on_orden_solicitada,
    make_on_pago_exitoso,
    on_orden_cancelada,
)
from inventario.metrics import RESERVATIONS, ReservationOutcome
from inventario.usecases.expire_reservations import expire_reservations
from inventario.usecases.set_stock import BelowReserved, set_stock
from saga_contracts.events.orders import OrdenSolicitada
from saga_harness import db, sealing
from saga_harness.clients import new_sku
from saga_harness.events import orden_cancelada, orden_solicitada, pago_exitoso
from saga_harness.faults import row_locked
from saga_harness.waiting import wait_for
from sagakit.consumer import Handler
from sagakit.message import Message
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

from .scratch_tables import add_product, deliver, scratch_copy

SCRATCH = "inventario_reservations"
SETTINGS = InventarioSettings()
VALIDATE = make_on_orden_solicitada(SETTINGS)
PAY = make_on_pago_exitoso(SETTINGS)


def _order(sku: str, units: int) -> Message[OrdenSolicitada]:
    saga_id, order_id = f"probe-{uuid.uuid4()}", str(uuid.uuid4())
    return orden_solicitada((sku, units), saga_id=saga_id, order_id=order_id, price="5.00",
                            currency="USD", payment_method={
                                "type": "credit_card", "token": sealing.sealed(
                                    "tok_visa", sealing.charge(
                                        saga_id=saga_id, order_id=order_id, customer_id="c-1",
                                        amount=f"{5 * units}.00"))})


def _paid(order: Message[OrdenSolicitada]) -> Message[Any]:
    units = sum(i.quantity for i in order.payload.items)
    return pago_exitoso(order.saga_id, order.payload.order_id, amount=f"{5 * units}.00",
                        currency="USD")


def _cancelled(order: Message[OrdenSolicitada]) -> Message[Any]:
    return orden_cancelada(order.saga_id, order.payload.order_id, reason="pago_rechazado",
                           status="CANCELADA")


class Copy:
    """The copy of the tables, its engine, and what the tests read of it."""

    def __init__(self, engine: AsyncEngine, tables: MessagingTables) -> None:
        self.engine, self.tables = engine, tables

    async def deliver(self, handler: Handler[Any], event: Message[Any]) -> bool:
        return await deliver(self.engine, self.tables, handler, event)

    async def product(self, sku: str, units: int, strategy: str = "reserve_then_pay") -> None:
        await add_product(self.engine, SCRATCH, sku, units, strategy)

    async def value(self, sql: str, **params: Any) -> Any:
        async with self.engine.connect() as conn:
            return (await conn.execute(text(sql.replace("{s}", SCRATCH)), params)).scalar()

    async def quantity(self, sku: str) -> int:
        return int(await self.value("SELECT quantity FROM {s}.products WHERE sku = :k", k=sku))

    async def reservation(self, saga_id: str) -> str | None:
        status: str | None = await self.value(
            "SELECT status FROM {s}.reservations WHERE saga_id = :k", k=saga_id)
        return status

    async def events(self, saga_id: str) -> list[str]:
        found: list[str] | None = await self.value(
            "SELECT array_agg(event_type ORDER BY id) FROM {s}.outbox WHERE saga_id = :k",
            k=saga_id)
        return found or []

    async def past_deadline(self, saga_id: str) -> None:
        """Until the database clock passes the saga's reservation deadline."""
        await wait_for(lambda: self.value(
            "SELECT bool_and(expires_at <= now()) FROM {s}.reservations WHERE saga_id = :k",
            k=saga_id), lambda passed: passed is True, timeout=10,
            what=f"the reservation of {saga_id} past its deadline")


@pytest.fixture
async def copy(running_stack: None) -> AsyncIterator[Copy]:
    async with scratch_copy(SCRATCH) as (engine, tables):
        yield Copy(engine, tables)


async def _waiting_for_a_lock(n: int) -> None:
    async def waiting() -> int:
        return int(await db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE $1", f'%{SCRATCH}%'))
    await wait_for(waiting, lambda count: count >= n, timeout=10,
                   what=f"{n} statements waiting for a lock")


async def test_two_validations_for_the_last_units_at_once_reserve_them_once(
        copy: Copy) -> None:
    sku = new_sku()
    await copy.product(sku, 3)
    first, second = _order(sku, 2), _order(sku, 2)
    async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE", sku):
        both = [asyncio.create_task(copy.deliver(VALIDATE, order))
                for order in (first, second)]
        await _waiting_for_a_lock(2)  # both read 3 units available, both wait at commit
    committed = await asyncio.wait_for(asyncio.gather(*both), 10)

    assert sorted(committed) == [False, True], "one reserved, the other's guard held"
    winner, loser = (first, second) if committed[0] else (second, first)
    assert await copy.reservation(winner.saga_id) == "RESERVED"
    assert await copy.reservation(loser.saga_id) is None
    assert await copy.events(loser.saga_id) == [], "a refused unit wrote its answer"
    assert await copy.deliver(VALIDATE, loser)  # handled again, on what is there now
    assert await copy.events(loser.saga_id) == ["StockNoDisponible"]
    assert await copy.events(winner.saga_id) == ["StockVerificado"]
    assert await copy.value("SELECT sum(quantity) FROM {s}.reservations "
                            "WHERE sku = :k AND status = 'RESERVED'", k=sku) == 2


async def test_a_check_then_pay_allocation_counts_a_reservation_committed_while_it_waited(
        copy: Copy) -> None:
    """A Check-Then-Pay saga verified the last units without holding them; another saga's
    validation reserves them while the allocation waits for the product (queued behind it at
    the lock): read after the lock, that reservation counts, the allocation's guard writes
    nothing, and handled again it fails (a refund follows), the reserved units untouched."""
    sku = new_sku()
    await copy.product(sku, 2, "check_then_pay")
    plain = _order(sku, 2)
    assert await copy.deliver(VALIDATE, plain)  # verified, nothing held
    async with copy.engine.begin() as conn:
        await conn.execute(text(f"UPDATE {SCRATCH}.products SET allocation_strategy = "
                                "'reserve_then_pay' WHERE sku = :k"), {"k": sku})
    reserving = _order(sku, 2)
    async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE", sku):
        held = asyncio.create_task(copy.deliver(VALIDATE, reserving))
        await _waiting_for_a_lock(1)  # first in the lock's queue
        paid = asyncio.create_task(copy.deliver(PAY, _paid(plain)))
        await _waiting_for_a_lock(2)  # read 2 units and no reservation; second in the queue
    assert await asyncio.wait_for(held, 10)
    assert not await asyncio.wait_for(paid, 10), "the allocation took reserved units"
    assert await copy.deliver(PAY, _paid(plain))
    assert await copy.events(plain.saga_id) == ["StockVerificado", "FalloAsignacion"]
    assert await copy.quantity(sku) == 2
    assert await copy.reservation(reserving.saga_id) == "RESERVED"


async def test_a_payment_after_the_deadline_with_the_units_reserved_again_is_refunded(
        copy: Copy) -> None:
    """The job has not run: the expired reservation still says RESERVED, yet it holds nothing;
    another saga reserved the units; the late payment fails (its refund follows)."""
    sku = new_sku()
    await copy.product(sku, 2)
    short_lived = make_on_orden_solicitada(InventarioSettings(reservation_ttl_s=0.3))
    late = _order(sku, 2)
    assert await copy.deliver(short_lived, late)
    await copy.past_deadline(late.saga_id)
    other = _order(sku, 2)
    assert await copy.deliver(VALIDATE, other)
    assert await copy.events(other.saga_id) == ["StockVerificado"]

    assert await copy.deliver(PAY, _paid(late))
    assert await copy.events(late.saga_id) == ["StockVerificado", "FalloAsignacion"]
    assert await copy.quantity(sku) == 2
    assert await copy.reservation(late.saga_id) == "RESERVED"  # unmarked, and holding nothing
    assert await copy.deliver(PAY, _paid(other))
    assert await copy.events(other.saga_id) == ["StockVerificado", "StockAsignado"]
    assert await copy.quantity(sku) == 0
    assert await copy.reservation(other.saga_id) == "CONFIRMED"


async def test_a_payment_after_the_job_expired_the_reservation_takes_the_units_still_there(
        copy: Copy) -> None:
    sku = new_sku()
    await copy.product(sku, 2)
    late = _order(sku, 2)
    assert await copy.deliver(make_on_orden_solicitada(
        InventarioSettings(reservation_ttl_s=0.3)), late)
    await copy.past_deadline(late.saga_id)
    deadlines = ReservationDeadlineStore(copy.engine, SCRATCH)
    expired = await deadlines.expire_due(100)
    assert [r.saga_id for r in expired] == [late.saga_id]
    assert await deadlines.expire_due(100) == []  # once
    assert await deadlines.seconds_to_next() is None

    assert await copy.deliver(PAY, _paid(late))
    assert await copy.events(late.saga_id) == ["StockVerificado", "StockAsignado"]
    assert await copy.quantity(sku) == 0
    assert await copy.reservation(late.saga_id) == "EXPIRED"


async def test_a_cancellation_during_a_reservation_releases_it_once(copy: Copy) -> None:
    sku = new_sku()
    await copy.product(sku, 2)
    held = _order(sku, 2)
    assert await copy.deliver(VALIDATE, held)
    assert await copy.deliver(on_orden_cancelada, _cancelled(held))
    assert await copy.reservation(held.saga_id) == "RELEASED"
    assert await copy.deliver(on_orden_cancelada, _cancelled(held))  # another copy of it
    assert await copy.reservation(held.saga_id) == "RELEASED"
    assert await copy.value("SELECT status FROM {s}.allocations WHERE saga_id = :k",
                            k=held.saga_id) == "BLOCKED"
    following = _order(sku, 2)
    assert await copy.deliver(VALIDATE, following)
    assert await copy.events(following.saga_id) == ["StockVerificado"]
    assert await copy.deliver(PAY, _paid(held))  # a late payment takes nothing
    assert await copy.events(held.saga_id) == ["StockVerificado"]
    assert await copy.quantity(sku) == 2


async def test_a_cancellation_racing_the_confirmation_wins_and_nothing_is_taken(
        copy: Copy) -> None:
    sku = new_sku()
    await copy.product(sku, 2)
    held = _order(sku, 2)
    assert await copy.deliver(VALIDATE, held)
    async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE", sku):
        confirming = asyncio.create_task(copy.deliver(PAY, _paid(held)))
        await _waiting_for_a_lock(1)  # read its live reservation; waits at commit
        assert await asyncio.wait_for(copy.deliver(on_orden_cancelada, _cancelled(held)), 10)
    assert not await asyncio.wait_for(confirming, 10), "the confirmation's guard held"
    assert await copy.deliver(PAY, _paid(held))  # handled again: the saga is blocked
    assert await copy.events(held.saga_id) == ["StockVerificado"]
    assert await copy.reservation(held.saga_id) == "RELEASED"
    assert await copy.quantity(sku) == 2


async def test_a_confirmation_before_the_cancellation_is_put_back(copy: Copy) -> None:
    sku = new_sku()
    await copy.product(sku, 2)
    held = _order(sku, 2)
    assert await copy.deliver(VALIDATE, held)
    assert await copy.deliver(PAY, _paid(held))
    assert await copy.reservation(held.saga_id) == "CONFIRMED"
    assert await copy.deliver(on_orden_cancelada, _cancelled(held))
    assert await copy.events(held.saga_id) == ["StockVerificado", "StockAsignado",
                                               "StockLiberado"]
    assert await copy.reservation(held.saga_id) == "CONFIRMED"
    assert await copy.quantity(sku) == 2


async def _until_written(copy: Copy, handler: Handler[Any], event: Message[Any]) -> None:
    """Handled again while its guard writes nothing, as the consumer's quick retries do."""
    for _ in range(50):
        if await copy.deliver(handler, event):
            return
    raise AssertionError(f"{event.event_type} of {event.saga_id}: never written")


async def _strategy_ran(copy: Copy, saga_id: str) -> str | None:
    ran: str | None = await copy.value(
        "SELECT answer->'payload'->>'allocation_strategy' FROM {s}.stock_checks "
        "WHERE saga_id = :k AND result = 'verified'", k=saga_id)
    return ran


async def test_auto_validations_read_at_once_decide_one_after_the_other_under_the_lock(
        copy: Copy) -> None:
    """Five single units for 10 under ``auto`` (ratio 0.5): all five read nothing in flight
    and would check without reserving; at their commit they wait for the product (held by the
    test). Let go, they commit one after the other, each asking the rule again on what the
    others committed: four check (1 to 4 units in flight, below half of 10), the fifth finds
    4 + 1 ≥ 5 and writes nothing; handled again, it reserves. Without the rule asked again
    under the lock, all five would check."""
    sku = new_sku()
    await copy.product(sku, 10, "auto")
    orders = [_order(sku, 1) for _ in range(5)]
    async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE", sku):
        at_once = [asyncio.create_task(copy.deliver(VALIDATE, order)) for order in orders]
        await _waiting_for_a_lock(5)
    committed = await asyncio.wait_for(asyncio.gather(*at_once), 10)

    assert sorted(committed) == [False, True, True, True, True]
    [late] = [order for order, written in zip(orders, committed, strict=True) if not written]
    assert await copy.events(late.saga_id) == []
    assert await copy.deliver(VALIDATE, late)
    assert await _strategy_ran(copy, late.saga_id) == "reserve_then_pay"
    assert await copy.reservation(late.saga_id) == "RESERVED"


async def test_a_burst_of_forty_for_ten_units_under_auto_loses_no_race(copy: Copy) -> None:
    """Forty orders of 1 to 3 units validated at once for a product of 10 under ``auto``,
    then every verified one paid: none fails its allocation (the bound: no race lost), the
    verified units are exactly what was taken, and both strategies ran. The same burst for a
    product with ample stock reserves nothing."""
    scarce, ample = new_sku(), new_sku()
    await copy.product(scarce, 10, "auto")
    await copy.product(ample, 10_000, "auto")
    rng = random.Random(47)
    for sku in (scarce, ample):
        orders = [_order(sku, rng.randint(1, 3)) for _ in range(40)]
        await asyncio.wait_for(asyncio.gather(
            *(_until_written(copy, VALIDATE, order) for order in orders)), 60)
        ran = {order.saga_id: await _strategy_ran(copy, order.saga_id) for order in orders}
        verified = [order for order in orders if ran[order.saga_id] is not None]
        for order in verified:
            assert await copy.deliver(PAY, _paid(order))
        outcomes = [(await copy.events(order.saga_id))[-1] for order in verified]
        assert "FalloAsignacion" not in outcomes, "a payment lost the race for its units"
        taken = sum(i.quantity for order in verified for i in order.payload.items)
        if sku == scarce:
            assert set(ran.values()) == {"check_then_pay", "reserve_then_pay", None}, ran
            assert taken == 10 - await copy.quantity(sku) and await copy.quantity(sku) >= 0
        else:
            assert set(ran.values()) == {"check_then_pay"}, "a calm product reserved"
            assert await copy.quantity(sku) == 10_000 - taken
            assert await copy.value("SELECT count(*) FROM {s}.reservations WHERE sku = :k",
                                    k=sku) == 0


async def _put(copy: Copy, sku: str, quantity: int | None,
               strategy: AllocationStrategy | None = None) -> int | BelowReserved:
    """PUT /products/{sku}'s use case on the copy: the quantity set, or its refusal."""
    try:
        async with UnitOfWork(copy.engine, copy.tables, "inventario") as uow:
            return (await set_stock(uow, StockRepository(uow), sku, quantity,
                                    strategy=strategy)).quantity
    except BelowReserved as refused:
        return refused


async def test_a_quantity_below_what_is_reserved_is_refused_even_if_reserved_meanwhile(
        copy: Copy) -> None:
    """A reservation of 3 of 4 units waits for the product (held by the test) at its commit;
    behind it, a PUT of 2 units waits for the lock. Let go, the reservation commits first;
    the PUT, reading what is reserved after its lock (not on a snapshot from before), refuses
    2 < 3 and writes nothing. 3 is then taken."""
    sku = new_sku()
    await copy.product(sku, 4)
    held = _order(sku, 3)
    async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE", sku):
        reserving = asyncio.create_task(copy.deliver(VALIDATE, held))
        await _waiting_for_a_lock(1)
        lowering = asyncio.create_task(_put(copy, sku, 2))
        await _waiting_for_a_lock(2)
    assert await asyncio.wait_for(reserving, 10)
    refused = await asyncio.wait_for(lowering, 10)
    assert isinstance(refused, BelowReserved) and refused.reserved == 3, refused
    assert await copy.quantity(sku) == 4
    assert await _put(copy, sku, 3) == 3
    assert await copy.deliver(PAY, _paid(held))
    assert await copy.events(held.saga_id) == ["StockVerificado", "StockAsignado"]
    assert await copy.quantity(sku) == 0


async def test_a_reservation_waiting_behind_a_lowered_quantity_reads_the_new_one(
        copy: Copy) -> None:
    """The PUT of 1 unit gets the product first; the reservation of 3, which read 4, waits at
    its commit and then finds 1: its guard writes nothing, and handled again it is
    StockNoDisponible. The quantity is never below what is reserved."""
    sku = new_sku()
    await copy.product(sku, 4)
    late = _order(sku, 3)
    async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE", sku):
        lowering = asyncio.create_task(_put(copy, sku, 1))
        await _waiting_for_a_lock(1)
        reserving = asyncio.create_task(copy.deliver(VALIDATE, late))
        await _waiting_for_a_lock(2)
    assert await asyncio.wait_for(lowering, 10) == 1
    assert not await asyncio.wait_for(reserving, 10), "reserved 3 of 1 unit"
    assert await copy.deliver(VALIDATE, late)
    assert await copy.events(late.saga_id) == ["StockNoDisponible"]
    assert await copy.reservation(late.saga_id) is None


async def test_a_strategy_changed_during_a_sale_keeps_the_units_sold_meanwhile(
        copy: Copy) -> None:
    """An operator switches a product of 10 units to reserve_then_pay while an allocation of 3
    holds it (waiting for the test's lock at its commit). The PUT gives no quantity: it waits
    for the product behind the allocation and keeps the 7 left, where an absolute quantity read
    before the sale (10) would have given back the 3 units sold: an oversell."""
    sku = new_sku()
    await copy.product(sku, 10)
    sold = _order(sku, 3)
    assert await copy.deliver(VALIDATE, sold)
    async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE", sku):
        allocating = asyncio.create_task(copy.deliver(PAY, _paid(sold)))
        await _waiting_for_a_lock(1)
        switching = asyncio.create_task(
            _put(copy, sku, None, AllocationStrategy.RESERVE_THEN_PAY))
        await _waiting_for_a_lock(2)
    assert await asyncio.wait_for(allocating, 10)
    assert await asyncio.wait_for(switching, 10) == 7
    assert await copy.events(sold.saga_id) == ["StockVerificado", "StockAsignado"]
    assert await copy.quantity(sku) == 7
    assert await copy.value("SELECT allocation_strategy FROM {s}.products WHERE sku = :k",
                            k=sku) == "reserve_then_pay"
async def test_a_cancellation_between_the_validations_read_and_its_commit_leaves_nothing_held(
        copy: Copy) -> None:
    sku = new_sku()
    await copy.product(sku, 2)
    order = _order(sku, 2)
    async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE", sku):
        validating = asyncio.create_task(copy.deliver(VALIDATE, order))
        await _waiting_for_a_lock(1)  # read: no allocation, 2 available; its commit waits
        assert await asyncio.wait_for(copy.deliver(on_orden_cancelada, _cancelled(order)), 10)
    assert not await asyncio.wait_for(validating, 10), "a cancelled saga's check committed"
    assert await copy.deliver(VALIDATE, order)  # handled again: the saga is blocked
    assert await copy.reservation(order.saga_id) is None
    assert await copy.events(order.saga_id) == []
    assert await copy.value("SELECT status FROM {s}.allocations WHERE saga_id = :k",
                            k=order.saga_id) == "BLOCKED"
    following = _order(sku, 2)
    assert await copy.deliver(VALIDATE, following)
    assert await copy.events(following.saga_id) == ["StockVerificado"]


async def test_a_reservation_due_while_its_confirmation_waits_is_confirmed_and_counted_once(
        copy: Copy) -> None:
    def count(outcome: ReservationOutcome) -> float:
        return float(RESERVATIONS.labels("inventario", outcome)._value.get())  # type: ignore[attr-defined]

    sku = new_sku()
    await copy.product(sku, 2)
    order = _order(sku, 2)
    assert await copy.deliver(make_on_orden_solicitada(
        InventarioSettings(reservation_ttl_s=1.5)), order)
    before = count(ReservationOutcome.CONFIRMED), count(ReservationOutcome.EXPIRED)
    async with row_locked(f"SELECT 1 FROM {SCRATCH}.products WHERE sku = $1 FOR UPDATE", sku):
        paying = asyncio.create_task(copy.deliver(PAY, _paid(order)))
        await _waiting_for_a_lock(1)  # read: its reservation live; its commit waits
        await copy.past_deadline(order.saga_id)
        await expire_reservations(ReservationDeadlineStore(copy.engine, SCRATCH),
                                  interval_s=5)
    assert await asyncio.wait_for(paying, 10)
    assert await copy.events(order.saga_id) == ["StockVerificado", "StockAsignado"]
    assert await copy.reservation(order.saga_id) == "CONFIRMED"
    assert await copy.quantity(sku) == 0
    after = count(ReservationOutcome.CONFIRMED), count(ReservationOutcome.EXPIRED)
    assert (after[0] - before[0], after[1] - before[1]) == (1, 0)
    assert await ReservationDeadlineStore(copy.engine, SCRATCH).expire_due(100) == []
