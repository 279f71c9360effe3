"""A saga's PagoExitoso and StockAsignado handled at once complete the order exactly once,
whichever commits first. Forced on the real PostgreSQL (a scratch copy of pedidos' tables)
with explicit barriers.

They travel on different topics, so pedidos handles them in different lanes (or instances),
concurrently. The tracker takes no lock: each event is decided on the saga row as it read it,
and its write is guarded by the two facts the decision depends on, the saga's status and
whether a StockAsignado that came before the payment was recorded. Whichever event commits
second was decided on a row the first changed: its guard finds nothing, it writes nothing (no
inbox row either), and the consumer's retry decides it again on the row as it is now, which
completes the order. Two ways for the second to lose:

- it read the row before the first committed, and writes after (a barrier after its read);
- its write reaches the row while the first's write holds it (the first's write kept open in
  a transaction the test controls): PostgreSQL makes the waiting UPDATE re-check its WHERE on
  the row the first committed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pedidos.adapters.known_sagas import KnownSagas, cached_stores
from pedidos.adapters.order_repository import (
    OrderRepository,
    allocation_write,
    creation_write,
    lock_saga,
    transition_write,
)
from pedidos.config import PedidosSettings
from pedidos.domain.order import OrderStatus
from pedidos.entrypoints.messages import make_track_saga
from pedidos.usecases.ports import AuditEntry, SagaState
from saga_harness import db
from saga_harness.clients import new_sku, order_body
from saga_harness.events import message, payload_of
from saga_harness.waiting import wait_for
from sagakit.message import Message
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "paidallocated"
TABLES = ("orders", "sagas", "saga_audit", "notifications", "outbox", "processed_messages")
Scratch = tuple[AsyncEngine, MessagingTables]
SOURCE = {"PagoExitoso": "pagos", "StockAsignado": "inventario", "StockVerificado": "inventario"}
OTHER = {"PagoExitoso": "StockAsignado", "StockAsignado": "PagoExitoso"}


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[Scratch]:
    async with db.scratch_copy(SCHEMA, "pedidos", TABLES) as copy:
        yield copy


def _event(event_type: str, saga_id: str, order_id: str) -> Message[Any]:
    fields = {"charge_id": "ch_1"} if event_type == "PagoExitoso" else {}
    return message(event_type, saga_id, payload_of(event_type, order_id, **fields),
                   SOURCE[event_type])


async def _track(engine: AsyncEngine, tables: MessagingTables, known: KnownSagas,
                 event: Message[Any]) -> bool:
    """What the consumer does with a participant's event, once: True if it was written."""
    async with UnitOfWork(engine, tables, "pedidos", reads_outside_transaction=True) as uow:
        uow.claim(event.message_id, event.event_type, event.saga_id)
        await make_track_saga(PedidosSettings(), cached_stores(known))(uow, event)
        return uow.committed


async def _awaiting_payment(engine: AsyncEngine, tables: MessagingTables
                            ) -> tuple[str, str]:
    """A saga placed (10.00 USD) and moved on to PENDIENTE_PAGO by its StockVerificado."""
    order_id, saga_id = uuid.uuid4(), uuid.uuid4()
    async with UnitOfWork(engine, tables, "pedidos") as uow:
        uow.stage(creation_write(
            order_id=order_id, saga_id=saga_id, body=order_body([(new_sku(), 2)]),
            total=Decimal("10.00"), idempotency_key=None, request_hash="h", context={},
            step_timeout_s=30, saga_timeout_s=3600, audit=AuditEntry("OrdenSolicitada", "test")))
        assert await uow.commit()
    verified = _event("StockVerificado", str(saga_id), str(order_id))
    assert await _track(engine, tables, KnownSagas(), verified)
    return str(saga_id), str(order_id)


async def _outcome(engine: AsyncEngine, saga_id: str) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(text(
            f"SELECT s.status, o.status AS order_status, o.charge_id, "
            f"s.stock_allocated_at IS NOT NULL AS allocated, "
            f"(SELECT array_agg(event_type || ':' || coalesce(to_status, '') ORDER BY id) "
            f" FROM {SCHEMA}.saga_audit a WHERE a.saga_id = s.saga_id) AS history, "
            f"(SELECT count(*) FROM {SCHEMA}.outbox b WHERE b.saga_id = :text_id "
            f" AND b.event_type = 'OrdenCompletada') AS completions, "
            f"(SELECT count(*) FROM {SCHEMA}.notifications n WHERE n.order_id = o.order_id "
            f" AND n.kind = 'COMPLETADA') AS notified "
            f"FROM {SCHEMA}.sagas s JOIN {SCHEMA}.orders o USING (order_id) "
            f"WHERE s.saga_id = :s"), {"s": uuid.UUID(saga_id), "text_id": saga_id})).one()


async def _processed(engine: AsyncEngine, *events: Message[Any]) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text(
            f"SELECT count(*) FROM {SCHEMA}.processed_messages "
            f"WHERE message_id = ANY(CAST(:ids AS text[]))"),
            {"ids": [e.message_id for e in events]})).scalar_one())


async def _waiting_on_a_lock() -> int:
    """Backends of the scratch schema's statements waiting for a row lock."""
    return int(await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        f"AND query LIKE '%{SCHEMA}%'"))


def _assert_completed_once(row: Any, first: str) -> None:
    assert (row.status, row.order_status, row.charge_id) == ("COMPLETADA", "COMPLETADA", "ch_1")
    assert row.completions == 1, "exactly one OrdenCompletada"
    assert row.notified == 1
    before = ["OrdenSolicitada:PENDIENTE_VALIDACION", "StockVerificado:PENDIENTE_PAGO"]
    if first == "StockAsignado":
        assert row.allocated, "the early allocation was recorded"
        assert row.history == [*before, "StockAsignado:PENDIENTE_PAGO", "PagoExitoso:COMPLETADA"]
    else:
        assert not row.allocated, "the allocation came after the payment: nothing to record"
        assert row.history == [*before, "PagoExitoso:PENDIENTE_ASIGNACION",
                               "StockAsignado:COMPLETADA"]


@pytest.mark.parametrize("first", ["StockAsignado", "PagoExitoso"])
async def test_both_decided_on_the_same_row_complete_the_order_once(
        scratch: Scratch, monkeypatch: pytest.MonkeyPatch, first: str) -> None:
    """The second reads the saga (PENDIENTE_PAGO, nothing allocated) and is held there while
    ``first`` is handled and commits; then it decides and writes on what it read."""
    engine, tables = scratch
    saga_id, order_id = await _awaiting_payment(engine, tables)
    winner, loser = _event(first, saga_id, order_id), _event(OTHER[first], saga_id, order_id)
    # One process: both lanes share its KnownSagas, as the composition root wires it.
    known = KnownSagas()

    read_done, go_on = asyncio.Event(), asyncio.Event()
    original = OrderRepository.read

    async def read_then_wait(repo: OrderRepository, saga_id: str) -> SagaState | None:
        row = await original(repo, saga_id)
        if not read_done.is_set():
            read_done.set()
            await go_on.wait()
        return row

    monkeypatch.setattr(OrderRepository, "read", read_then_wait)
    losing = asyncio.create_task(_track(engine, tables, known, loser))
    await asyncio.wait_for(read_done.wait(), 10)
    assert await _track(engine, tables, known, winner), f"{first} commits first"
    go_on.set()

    assert await asyncio.wait_for(losing, 10) is False, (
        "decided on a row the first changed: nothing written")
    assert await _processed(engine, loser) == 0, "not even its inbox row"
    assert (await _outcome(engine, saga_id)).completions == 0

    # The consumer handles the message again at once: decided on the row as it is now.
    assert await _track(engine, tables, known, loser)
    assert await _processed(engine, winner, loser) == 2
    _assert_completed_once(await _outcome(engine, saga_id), first)


@pytest.mark.parametrize("first", ["StockAsignado", "PagoExitoso"])
async def test_a_write_that_waits_for_the_others_row_is_decided_again(
        scratch: Scratch, first: str) -> None:
    """``first``'s write holds the saga row in a transaction left open; the other event, read
    before that commits, runs its guarded write into the row and waits; once ``first``
    commits, the waiting UPDATE re-checks its guard on the committed row and finds nothing."""
    engine, tables = scratch
    saga_id, order_id = await _awaiting_payment(engine, tables)
    loser = _event(OTHER[first], saga_id, order_id)
    known = KnownSagas()

    async with engine.connect() as conn:
        await conn.begin()
        saga = await lock_saga(conn, saga_id)
        assert saga is not None and saga.status is OrderStatus.PENDIENTE_PAGO
        assert not saga.stock_allocated
        # ``first``'s write as the tracker stages it, in a transaction left open: its row lock
        # is held.
        if first == "StockAsignado":
            write = allocation_write(saga, AuditEntry("StockAsignado", "inventario"))
        else:
            write = transition_write(saga, OrderStatus.PENDIENTE_ASIGNACION,
                                     step_timeout_s=PedidosSettings().allocation_timeout_s,
                                     audit=AuditEntry("PagoExitoso", "pagos"),
                                     charge_id="ch_1")
        assert await write.run(conn, SCHEMA)

        losing = asyncio.create_task(_track(engine, tables, known, loser))
        await wait_for(_waiting_on_a_lock, lambda n: n >= 1, timeout=10,
                       what=f"{loser.event_type}'s write waiting for the saga's row")
        await conn.commit()

    assert await asyncio.wait_for(losing, 10) is False, (
        "its guard, re-checked on the committed row, found nothing")
    assert await _processed(engine, loser) == 0
    assert known.get(saga_id) is None, "forgotten: the retry reads the saga"

    assert await _track(engine, tables, known, loser)
    _assert_completed_once(await _outcome(engine, saga_id), first)
