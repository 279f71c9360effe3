"""A pedidos instance that hangs while it holds a saga's row lock (its deadline scanner, or any
path that locks the saga first) keeps that saga from the other instances no longer than
``DB_IDLE_IN_TRANSACTION_TIMEOUT_S``: PostgreSQL ends a transaction whose client sends nothing
for that long, whatever the client is doing (stopped by SIGSTOP, cut off).

On the real PostgreSQL (a scratch copy of pedidos' tables), through an engine built as pedidos
builds its own (``sagakit.store.database.build_engine``). The scanner of one instance locks a
saga past its step deadline and hangs there; the scanner of another skips the saga (SKIP
LOCKED) until the hung transaction is ended, then times it out, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pedidos.adapters.deadline_schedule import DeadlineSchedule
from pedidos.adapters.order_repository import OrderRepository, creation_write
from pedidos.config import PedidosSettings
from pedidos.usecases.enforce_deadlines import enforce_deadline, enforce_deadlines
from pedidos.usecases.ports import AuditEntry, OrderStore, OrderUnits, SagaState
from saga_harness import config, db
from saga_harness.clients import new_sku, order_body
from saga_harness.waiting import wait_for
from sagakit.ports import UnitOfWorkPort
from sagakit.store.database import build_engine
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "hungscanner"
TABLES = ("orders", "sagas", "saga_audit", "notifications", "outbox", "processed_messages")
Scratch = tuple[AsyncEngine, MessagingTables]

# DB_IDLE_IN_TRANSACTION_TIMEOUT_S's default, and what the measurement adds to it: the other
# scanner's next look, processes sharing cores.
IDLE_IN_TRANSACTION_S = 5.0
SLACK_S = 2.0


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[Scratch]:
    async with db.scratch_copy(SCHEMA, "pedidos", TABLES) as (_, tables):
        engine = build_engine(config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://"),
                              "pedidos", 4)
        try:
            yield engine.execution_options(schema_translate_map={"pedidos": SCHEMA}), tables
        finally:
            await engine.dispose()


def _units(engine: AsyncEngine, tables: MessagingTables) -> OrderUnits:
    @asynccontextmanager
    async def unit() -> AsyncIterator[tuple[UnitOfWorkPort, OrderStore]]:
        async with UnitOfWork(engine, tables, "pedidos") as uow:
            yield uow, OrderRepository(uow)

    return unit


async def _past_its_step_deadline(engine: AsyncEngine, tables: MessagingTables) -> str:
    """A saga waiting for its stock check whose step deadline has just passed."""
    order_id, saga_id = uuid.uuid4(), uuid.uuid4()
    async with UnitOfWork(engine, tables, "pedidos") as uow:
        uow.stage(creation_write(
            order_id=order_id, saga_id=saga_id, body=order_body([(new_sku(), 1)]),
            total=Decimal("10.00"), idempotency_key=None, request_hash="h", context={},
            step_timeout_s=0, saga_timeout_s=3600, audit=AuditEntry("OrdenSolicitada", "test")))
        assert await uow.commit()
    return str(saga_id)


async def _status(engine: AsyncEngine, saga_id: str) -> str:
    async with engine.connect() as conn:
        return str((await conn.execute(text(
            f"SELECT status FROM {SCHEMA}.sagas WHERE saga_id = :s"),
            {"s": uuid.UUID(saga_id)})).scalar_one())


def _hanging_at_its_lock(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """The first ``OrderRepository.lock`` that locks a saga never returns (its transaction
    stays open, as in an instance stopped right there); ``hung`` says it is there."""
    hung = asyncio.Event()
    original = OrderRepository.lock

    async def lock_then_hang(repo: OrderRepository, saga_id: str,
                             skip_locked: bool = False) -> SagaState | None:
        row = await original(repo, saga_id, skip_locked)
        if row is not None and not hung.is_set():
            hung.set()
            await asyncio.Event().wait()
        return row

    monkeypatch.setattr(OrderRepository, "lock", lock_then_hang)
    return hung


async def test_a_scanner_hung_on_a_saga_holds_it_no_longer_than_the_bound(
        scratch: Scratch, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, tables = scratch
    settings = PedidosSettings()
    saga_id = await _past_its_step_deadline(engine, tables)
    hung = _hanging_at_its_lock(monkeypatch)
    schedule = DeadlineSchedule(engine)
    hanging = asyncio.create_task(
        enforce_deadline(schedule, _units(engine, tables), settings, saga_id))
    try:
        await asyncio.wait_for(hung.wait(), 10)
        hung_at = time.monotonic()

        async def other_instance_scans() -> str:
            await enforce_deadlines(schedule, _units(engine, tables), settings)
            return await _status(engine, saga_id)

        await wait_for(other_instance_scans, lambda s: s == "CANCELADA_TIMEOUT",
                       timeout=IDLE_IN_TRANSACTION_S + SLACK_S, interval=0.1,
                       what="the other instance's scanner timed the saga out")
        print(f"a scanner hung on a saga held it {time.monotonic() - hung_at:.2f}s "
              f"(bound {IDLE_IN_TRANSACTION_S}s + {SLACK_S}s)")
    finally:
        hanging.cancel()
        with contextlib.suppress(BaseException):
            await hanging
    async with engine.connect() as conn:
        emitted = (await conn.execute(text(
            f"SELECT event_type FROM {SCHEMA}.outbox WHERE saga_id = :s ORDER BY id"),
            {"s": saga_id})).scalars().all()
    assert "StepTimedOut" in emitted and emitted.count("StepTimedOut") == 1, emitted
