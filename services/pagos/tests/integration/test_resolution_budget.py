"""A charge cancelled while a gateway outage kept its outcome unknown, against real PostgreSQL
(a scratch copy of pagos' tables) and the model gateway's ledger: the replays that resolve the
cancellation have their whole budget (PAGOS_RESOLVE_ATTEMPTS, 3 here), counted on the payment
(``resolve_attempts``) apart from the calls the charge made before, and kept there from one
worker to the next.

The timing is the one that paged finance for nothing: the charge's calls go unanswered until
pedidos cancels the step; the first replay is still unanswered; the gateway is back for the
second and says no charge was ever made.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from saga_harness import db
from saga_harness import events as ev
from saga_harness import payments as pay
from saga_harness.waiting import wait_for
from sagakit.store.tables import MessagingTables

SCHEMA = "resolvebudget"
SETTINGS = pay.settings(resolve_attempts=3, charge_retry_schedule_s=(0.05, 0.05, 0.05))

Scratch = tuple[AsyncEngine, MessagingTables]


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[Scratch]:
    async with db.scratch_copy(SCHEMA, "pagos", pay.SCRATCH_TABLES) as copy:
        yield copy


async def _step(engine: AsyncEngine, tables: MessagingTables, gateway: pay.LedgerGateway,
                saga_id: str) -> Any:
    """One call of the saga's due work, by a worker of its own (as another instance, or pagos
    restarted, would make it: all it knows is in the table), once the work is due."""
    await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id), lambda r: r.due,
                   timeout=10, what="the next call due")
    worker = pay.worker(engine, tables, gateway, SETTINGS)
    assert (await worker.run_due())[0] == 1
    await asyncio.wait(set(worker._running), timeout=10)
    return await pay.payment(engine, SCHEMA, saga_id)


async def _outage_then_cancelled(engine: AsyncEngine, tables: MessagingTables,
                                 gateway: pay.LedgerGateway, saga_id: str, order_id: str,
                                 charges: int) -> None:
    gateway.unreachable.add(saga_id)
    await pay.deliver(engine, tables, pay.worker(engine, tables, gateway, SETTINGS),
                      ev.stock_verificado(saga_id, order_id))
    for made in range(1, charges + 1):
        row = await _step(engine, tables, gateway, saga_id)
        assert (row.status, row.charge_attempts) == ("CHARGING", made), row
    await pay.deliver(engine, tables, pay.worker(engine, tables, gateway, SETTINGS),
                      ev.orden_cancelada(saga_id, order_id))
    assert (await pay.payment(engine, SCHEMA, saga_id)).status == "CANCEL_REQUESTED"


async def test_a_cancelled_charge_is_resolved_when_the_gateway_is_back_within_its_replays(
        scratch: Scratch) -> None:
    engine, tables = scratch
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    gateway = pay.LedgerGateway()
    await _outage_then_cancelled(engine, tables, gateway, saga_id, order_id, charges=3)
    row = await _step(engine, tables, gateway, saga_id)
    assert row.status == "CANCEL_REQUESTED", f"one replay of three, resolved again: {row}"
    assert (row.charge_attempts, row.resolve_attempts) == (3, 1), row
    gateway.unreachable.discard(saga_id)  # back, and the card is declined: nothing was made
    gateway.declined.add(saga_id)
    row = await _step(engine, tables, gateway, saga_id)
    assert row.status == "CANCELLED" and not row.manual_refund_required, row
    assert (row.charge_attempts, row.resolve_attempts) == (3, 2), row
    # No FalloReembolso: nothing to refund; the decline told, for pedidos' decline limits.
    assert await pay.emitted(engine, SCHEMA, saga_id) == ["PagoRechazado"]
    assert gateway.net_charged(saga_id) == 0


async def test_a_cancelled_charge_is_left_for_a_refund_by_hand_only_after_every_replay(
        scratch: Scratch) -> None:
    engine, tables = scratch
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    gateway = pay.LedgerGateway()
    await _outage_then_cancelled(engine, tables, gateway, saga_id, order_id, charges=3)
    for replays in (1, 2):
        row = await _step(engine, tables, gateway, saga_id)
        assert (row.status, row.resolve_attempts) == ("CANCEL_REQUESTED", replays), row
    row = await _step(engine, tables, gateway, saga_id)
    assert row.status == "REFUND_FAILED" and row.manual_refund_required, row
    assert (row.charge_attempts, row.resolve_attempts) == (3, 3), row
    assert gateway.charge_calls(saga_id) == 6, "three charge calls, then three replays"
    assert await pay.emitted(engine, SCHEMA, saga_id) == ["FalloReembolso"]
