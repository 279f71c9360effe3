"""pedidos takes a saga's row locks in one order on every path, so two paths that move the same
saga at once wait for each other instead of deadlocking. Forced on the real PostgreSQL (a
scratch copy of pedidos' tables) with explicit barriers.

The paths that can move one saga at once: a participant's event (``track_saga``: no lock, one
guarded statement), a cancellation through the API (``cancel_saga``: the saga row locked, then
the transition), and the deadline scanner (``enforce_deadlines``: the same under SKIP LOCKED).
Each pair below holds one path at its lock and runs the other into it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pedidos.adapters.order_repository import (
    OrderRepository,
    creation_write,
    lock_saga,
    transition_write,
)
from pedidos.config import PedidosSettings
from pedidos.domain.order import OrderStatus, Transition
from pedidos.entrypoints.messages import make_track_saga
from pedidos.usecases.cancel_saga import cancel_saga
from pedidos.usecases.ports import AuditEntry, SagaState
from pedidos.usecases.transitions import stage_transition
from saga_harness import db
from saga_harness.clients import new_sku, order_body
from saga_harness.events import message, payload_of
from saga_harness.waiting import wait_for
from sagakit.message import Message
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "lockorder"
TABLES = ("orders", "sagas", "saga_audit", "notifications", "outbox", "processed_messages")
Scratch = tuple[AsyncEngine, MessagingTables]


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[Scratch]:
    async with db.scratch_copy(SCHEMA, "pedidos", TABLES) as copy:
        yield copy


def _settings() -> PedidosSettings:
    return PedidosSettings()


async def _placed(engine: AsyncEngine, tables: MessagingTables) -> tuple[str, str]:
    order_id, saga_id = uuid.uuid4(), uuid.uuid4()
    body = order_body([(new_sku(), 1)])
    async with UnitOfWork(engine, tables, "pedidos") as uow:
        uow.stage(creation_write(
            order_id=order_id, saga_id=saga_id, body=body, total=Decimal("10.00"),
            idempotency_key=None, request_hash="h", context={}, step_timeout_s=30,
            saga_timeout_s=3600, audit=AuditEntry("OrdenSolicitada", "test")))
        assert await uow.commit()
    return str(saga_id), str(order_id)


def _event(event_type: str, saga_id: str, order_id: str) -> Message[Any]:
    return message(event_type, saga_id, payload_of(event_type, order_id), "inventario")


async def _waiting_on_a_lock() -> int:
    """Backends of the scratch schema's statements waiting for a row lock."""
    return int(await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        f"AND query LIKE '%{SCHEMA}%'"))


async def _status(engine: AsyncEngine, saga_id: str) -> tuple[str, str]:
    async with engine.connect() as conn:
        row = (await conn.execute(text(
            f"SELECT s.status, o.status FROM {SCHEMA}.sagas s JOIN {SCHEMA}.orders o "
            "USING (order_id) WHERE s.saga_id = :s"), {"s": uuid.UUID(saga_id)})).one()
    return row[0], row[1]


async def _track(engine: AsyncEngine, tables: MessagingTables, event: Message[Any]) -> bool:
    """What the consumer does with a participant's event: True if it was written."""
    async with UnitOfWork(engine, tables, "pedidos", reads_outside_transaction=True) as uow:
        uow.claim(event.message_id, event.event_type, event.saga_id)
        await make_track_saga(_settings(), OrderRepository)(uow, event)
        return uow.committed


async def _held_at_lock(monkeypatch: pytest.MonkeyPatch
                        ) -> tuple[asyncio.Event, asyncio.Event]:
    """Makes the next ``OrderRepository.lock`` hold its lock until ``go_on``; ``locked`` says
    it holds."""
    locked, go_on = asyncio.Event(), asyncio.Event()
    original = OrderRepository.lock

    async def lock_then_wait(repo: OrderRepository, saga_id: str,
                             skip_locked: bool = False) -> SagaState | None:
        row = await original(repo, saga_id, skip_locked)
        if not locked.is_set():
            locked.set()
            await go_on.wait()
        return row

    monkeypatch.setattr(OrderRepository, "lock", lock_then_wait)
    return locked, go_on


async def _race(locking: Callable[[], Awaitable[object]],
                other: Callable[[], Awaitable[object]],
                locked: asyncio.Event, go_on: asyncio.Event) -> tuple[object, object]:
    """``locking`` takes the saga's lock and holds it; ``other`` runs into it and waits; then
    ``locking`` goes on to write. Neither may fail."""
    first = asyncio.create_task(locking())
    await asyncio.wait_for(locked.wait(), 10)
    second = asyncio.create_task(other())
    await wait_for(_waiting_on_a_lock, lambda n: n >= 1, timeout=10,
                   what="the second path waiting for the saga's lock")
    go_on.set()
    return await asyncio.gather(first, second)


async def test_a_cancel_holding_the_saga_and_an_event_moving_it_do_not_deadlock(
        scratch: Scratch, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, tables = scratch
    saga_id, order_id = await _placed(engine, tables)
    locked, go_on = await _held_at_lock(monkeypatch)

    async def cancel() -> OrderStatus:
        async with UnitOfWork(engine, tables, "pedidos") as uow:
            return await cancel_saga(uow, OrderRepository(uow), saga_id, "api", _settings())

    cancelled, tracked = await _race(
        cancel, lambda: _track(engine, tables, _event("StockVerificado", saga_id, order_id)),
        locked, go_on)
    assert cancelled is OrderStatus.CANCELADA_POR_USUARIO
    assert tracked is False, "decided on a status the cancellation changed: nothing written"
    assert await _status(engine, saga_id) == ("CANCELADA_POR_USUARIO",) * 2


async def test_a_deadline_holding_the_saga_and_an_event_moving_it_do_not_deadlock(
        scratch: Scratch, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline scanner's path: the saga locked (SKIP LOCKED), then its transition."""
    engine, tables = scratch
    saga_id, order_id = await _placed(engine, tables)
    locked, go_on = await _held_at_lock(monkeypatch)

    async def time_out() -> bool:
        async with UnitOfWork(engine, tables, "pedidos") as uow:
            orders = OrderRepository(uow)
            saga = await orders.lock(saga_id, skip_locked=True)
            assert saga is not None
            stage_transition(uow, orders, saga, Transition(OrderStatus.CANCELADA_TIMEOUT),
                             cause="StepTimedOut", actor="test", settings=_settings())
            return await uow.commit()

    timed_out, tracked = await _race(
        time_out, lambda: _track(engine, tables, _event("StockVerificado", saga_id, order_id)),
        locked, go_on)
    assert timed_out is True and tracked is False
    assert await _status(engine, saga_id) == ("CANCELADA_TIMEOUT",) * 2


async def test_an_event_moving_the_saga_and_a_cancel_arriving_meanwhile_do_not_deadlock(
        scratch: Scratch) -> None:
    """The other way round: the event's statement holds the rows it wrote (kept open by a
    transaction the test controls) while the cancellation comes to lock the saga."""
    engine, tables = scratch
    saga_id, _ = await _placed(engine, tables)
    async with engine.connect() as conn:
        await conn.begin()
        saga = await lock_saga(conn, saga_id)
        assert saga is not None
        # The event's write, in a transaction left open: its locks are held.
        assert await transition_write(
            saga, OrderStatus.PENDIENTE_PAGO, step_timeout_s=30,
            audit=AuditEntry("StockVerificado", "test")).run(conn, SCHEMA)

        async def cancel() -> OrderStatus:
            async with UnitOfWork(engine, tables, "pedidos") as uow:
                return await cancel_saga(uow, OrderRepository(uow), saga_id, "api",
                                         _settings())

        cancelling = asyncio.create_task(cancel())
        await wait_for(_waiting_on_a_lock, lambda n: n >= 1, timeout=10,
                       what="the cancellation waiting for the saga's lock")
        await conn.commit()
    assert await asyncio.wait_for(cancelling, 10) is OrderStatus.CANCELADA_POR_USUARIO
    assert await _status(engine, saga_id) == ("CANCELADA_POR_USUARIO",) * 2
