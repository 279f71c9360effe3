"""inventario's answer to a captured charge, recorded by pagos on the real PostgreSQL (a scratch
copy of its tables), judged by a model gateway's ledger: once the stock is allocated a
FalloAsignacion refunds nothing, and one heard before the allocation still refunds."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos.adapters.payment_repository import PaymentRepository
from pagos.domain.payment import Payment
from saga_harness import db
from saga_harness import events as ev
from saga_harness import payments as pay
from sagakit.errors import StaleRead
from sagakit.store.tables import MessagingTables

SCHEMA = "paymentalloc"

Scratch = tuple[AsyncEngine, MessagingTables]


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[Scratch]:
    async with db.scratch_copy(SCHEMA, "pagos", pay.SCRATCH_TABLES) as copy:
        yield copy


def _ids() -> tuple[str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4())


async def _captured(engine: AsyncEngine, tables: MessagingTables, gateway: pay.LedgerGateway,
                    saga_id: str, order_id: str) -> None:
    gw = pay.worker(engine, tables, gateway)
    await pay.deliver(engine, tables, gw, ev.stock_verificado(saga_id, order_id))
    row = await pay.settle(gw, engine, SCHEMA, saga_id)
    assert row.status == "CAPTURED" and gateway.net_charged(saga_id) == 1


async def _processed(engine: AsyncEngine, message_id: str) -> bool:
    async with engine.connect() as conn:
        return bool((await conn.execute(text(
            f"SELECT count(*) FROM {SCHEMA}.processed_messages WHERE message_id = :m"),
            {"m": message_id})).scalar_one())


async def test_an_allocation_failure_after_the_allocation_refunds_nothing(
        scratch: Scratch) -> None:
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway()
    await _captured(engine, tables, gateway, saga_id, order_id)
    gw = pay.worker(engine, tables, gateway)
    await pay.deliver(engine, tables, gw, ev.stock_asignado(saga_id, order_id))
    row = await pay.payment(engine, SCHEMA, saga_id)
    assert row.stock_allocated_at is not None and row.status == "CAPTURED"
    failure = ev.fallo_asignacion(saga_id, order_id)
    await pay.deliver(engine, tables, gw, failure)
    row = await pay.settle(gw, engine, SCHEMA, saga_id)
    assert row.status == "CAPTURED" and row.allocation_failed_at is None
    assert gateway.net_charged(saga_id) == 1 and gateway.refunds == {}
    assert await _processed(engine, failure.message_id), "refused, not left to retry"
    assert "ReembolsoEjecutado" not in await pay.emitted(engine, SCHEMA, saga_id)


async def test_an_allocation_failure_before_the_allocation_still_refunds(
        scratch: Scratch) -> None:
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway()
    await _captured(engine, tables, gateway, saga_id, order_id)
    gw = pay.worker(engine, tables, gateway)
    await pay.deliver(engine, tables, gw, ev.fallo_asignacion(saga_id, order_id))
    await pay.deliver(engine, tables, gw, ev.stock_asignado(saga_id, order_id))
    row = await pay.settle(gw, engine, SCHEMA, saga_id)
    assert row.status == "REFUNDED" and gateway.net_charged(saga_id) == 0
    assert row.allocation_failed_at is not None and row.stock_allocated_at is not None


async def test_an_allocation_recorded_on_a_payment_moved_meanwhile_writes_nothing(
        scratch: Scratch, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancellation moves the payment between the StockAsignado handler's read and its
    commit: the guarded write finds its status gone, nothing is written (the inbox row
    included), and the record handled again is recorded on the payment as it is now."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway()
    await _captured(engine, tables, gateway, saga_id, order_id)
    original_read = PaymentRepository.read

    async def read_then_cancelled(repo: PaymentRepository, saga: str) -> Payment | None:
        found = await original_read(repo, saga)
        async with engine.begin() as conn:
            await conn.execute(text(f"UPDATE {SCHEMA}.payments SET status = 'REFUNDING' "
                                    "WHERE saga_id = :s"), {"s": saga})
        monkeypatch.setattr(PaymentRepository, "read", original_read)
        return found

    monkeypatch.setattr(PaymentRepository, "read", read_then_cancelled)
    allocated = ev.stock_asignado(saga_id, order_id)
    gw = pay.worker(engine, tables, gateway)
    with pytest.raises(StaleRead):
        await pay.deliver(engine, tables, gw, allocated)
    row = await pay.payment(engine, SCHEMA, saga_id)
    assert row.stock_allocated_at is None and not await _processed(engine,
                                                                    allocated.message_id)
    await pay.deliver(engine, tables, gw, allocated)
    row = await pay.payment(engine, SCHEMA, saga_id)
    assert row.stock_allocated_at is not None and row.status == "REFUNDING"
    assert await _processed(engine, allocated.message_id)
