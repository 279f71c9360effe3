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
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from inventario.adapters.reservation_deadlines import ReservationDeadlineStore
from inventario.app import subscriptions
from inventario.config import InventarioSettings
from inventario.entrypoints.messages import (
    make_on_orden_solicitada,
    make_on_pago_exitoso,
    on_orden_cancelada,
)
from saga_contracts.events.orders import OrdenSolicitada
from saga_harness import db, sealing
from saga_harness.clients import new_sku
from saga_harness.events import orden_cancelada, orden_solicitada, pago_exitoso
from saga_harness.faults import row_locked
from saga_harness.waiting import wait_for
from sagakit.consumer import Handler
from sagakit.context import current_message
from sagakit.message import Message
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCRATCH = "inventario_reservations"
TABLES = ("products", "stock_checks", "allocations", "reservations", "outbox",
          "processed_messages")
SETTINGS = InventarioSettings()
VALIDATE = make_on_orden_solicitada(SETTINGS)
PAY = make_on_pago_exitoso(SETTINGS)


async def _deliver(engine: AsyncEngine, tables: MessagingTables, handler: Handler[Any],
                   event: Message[Any]) -> bool:
    """What the consumer does with one record, once: claim it, run the handler in the unit of
    work its subscription asks for (inventario.app), commit. False: its guard wrote nothing
    (the consumer would handle it again)."""
    options = {s.event_type: s for s in subscriptions(None)  # type: ignore[arg-type]
               }[event.event_type].unit_of_work_options
    token = current_message.set(event.envelope)
    try:
        async with UnitOfWork(engine, tables, "inventario", **options) as uow:
            uow.claim(event.message_id, event.event_type, event.saga_id)
            await handler(uow, event)
            if not uow.ended:
                await uow.commit()
            return uow.committed
    finally:
        current_message.reset(token)


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
        return await _deliver(self.engine, self.tables, handler, event)

    async def product(self, sku: str, units: int, strategy: str = "reserve_then_pay") -> None:
        async with self.engine.begin() as conn:
            await conn.execute(text(
                f"INSERT INTO {SCRATCH}.products (sku, quantity, price, currency, "
                "allocation_strategy) VALUES (:s, :q, 5.00, 'USD', :st)"),
                {"s": sku, "q": units, "st": strategy})

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
    async with db.scratch_copy(SCRATCH, "inventario", TABLES) as (engine, tables):
        yield Copy(engine, tables)


async def _waiting_for_a_lock(n: int) -> None:
    async def waiting() -> int:
        return int(await db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE $1", f'%"{SCRATCH}"%'))
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
