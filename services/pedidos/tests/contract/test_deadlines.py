"""``Deadlines``' contract (pedidos.usecases.ports), run on the in-memory fake and on
``DeadlineSchedule`` over PostgreSQL: the active sagas past a deadline, earliest step deadline
first, and how long until the next deadline still to come; the trace context a saga started
in."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from pedidos.domain.order import OrderStatus
from pedidos.usecases.ports import AuditEntry

from ..unit.fakes import ORDER_BODY
from .backends import OrderBackend


async def _saga(orders: OrderBackend, step_timeout_s: float, saga_timeout_s: float = 3600,
                traceparent: str | None = None) -> str:
    saga_id = uuid.uuid4()
    async with orders.unit() as (uow, store):
        store.add(order_id=uuid.uuid4(), saga_id=saga_id, body=ORDER_BODY,
                  total=Decimal("10.00"), idempotency_key=None, request_hash="h",
                  card_fingerprint="fp", context={"traceparent": traceparent},
                  step_timeout_s=step_timeout_s, saga_timeout_s=saga_timeout_s,
                  audit=AuditEntry("OrdenSolicitada", "c-1"))
        assert await uow.commit()
    return str(saga_id)


async def test_active_sagas_past_a_deadline_are_due_earliest_first(
        orders: OrderBackend) -> None:
    later = await _saga(orders, step_timeout_s=-10)
    earlier = await _saga(orders, step_timeout_s=-20)
    expired = await _saga(orders, step_timeout_s=600, saga_timeout_s=-1)
    await _saga(orders, step_timeout_s=60)
    finished = await _saga(orders, step_timeout_s=-30)
    async with orders.unit() as (uow, store):
        saga = await store.read(finished)
        assert saga is not None
        store.move(saga, OrderStatus.CANCELADA_SIN_STOCK, step_timeout_s=None,
                   audit=AuditEntry("StockNoDisponible", "inventario"))
        assert await uow.commit()

    due = await orders.deadlines().due(10)
    assert due.saga_ids == [earlier, later, expired]
    assert due.seconds_to_next is not None and 0 < due.seconds_to_next <= 60

    full = await orders.deadlines().due(2)
    assert (full.saga_ids, full.seconds_to_next) == ([earlier, later], 0.0)


async def test_nothing_due_and_nothing_to_come(orders: OrderBackend) -> None:
    due = await orders.deadlines().due(10)
    assert (due.saga_ids, due.seconds_to_next) == ([], None)
    await _saga(orders, step_timeout_s=120, saga_timeout_s=90)
    due = await orders.deadlines().due(10)
    assert due.saga_ids == []
    assert due.seconds_to_next == pytest.approx(90, abs=5)


async def test_the_trace_context_a_saga_started_in(orders: OrderBackend) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    saga_id = await _saga(orders, step_timeout_s=30, traceparent=traceparent)
    assert await orders.deadlines().traceparent_of(saga_id) == traceparent
    assert await orders.deadlines().traceparent_of(
        await _saga(orders, step_timeout_s=30)) is None
