"""pedidos' creation and transition writes against real PostgreSQL: order, saga and audit row
are written and moved together, an idempotency key used before writes nothing, and a decision
taken on a status, or an allocation, that is no longer current writes nothing (its guard finds
no row). Each write runs by itself in the probe's transaction, which is rolled back."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import text

from pedidos.adapters.order_repository import (
    allocation_write,
    creation_write,
    lock_saga,
    transition_write,
)
from pedidos.domain.order import OrderStatus
from pedidos.usecases.ports import AuditEntry
from saga_harness import db
from saga_harness.clients import Saga, new_sku, order_body


async def test_a_transition_moves_order_saga_and_history_or_nothing(saga: Saga) -> None:
    placed = await saga.settled_order(stock=0, status="CANCELADA_SIN_STOCK")
    async with db.probe() as conn:
        row = await lock_saga(conn, placed["saga_id"])
        assert row is not None and row.status is OrderStatus.CANCELADA_SIN_STOCK

        async def history() -> int:
            return int((await conn.execute(text(
                "SELECT count(*) FROM pedidos.saga_audit WHERE saga_id = :s"),
                {"s": row.saga_id})).scalar_one())

        async def statuses() -> tuple[str, str]:
            return tuple((await conn.execute(text(
                "SELECT o.status, s.status FROM pedidos.orders o JOIN pedidos.sagas s "
                "USING (order_id) WHERE s.saga_id = :s"), {"s": row.saga_id})).one())

        before = await history()
        stale = dataclasses.replace(row, status=OrderStatus.PENDIENTE_PAGO)
        assert not await transition_write(stale, OrderStatus.COMPLETADA, step_timeout_s=None,
                                          audit=AuditEntry("PagoExitoso", "test")
                                          ).run(conn, "pedidos")
        assert await history() == before
        assert await statuses() == ("CANCELADA_SIN_STOCK", "CANCELADA_SIN_STOCK")

        assert await transition_write(row, OrderStatus.TIMED_OUT, step_timeout_s=None,
                                      audit=AuditEntry("Probe", "test", "m-1", {"k": 1})
                                      ).run(conn, "pedidos")
        assert await history() == before + 1
        assert await statuses() == ("TIMED_OUT", "TIMED_OUT")
        last = (await conn.execute(text(
            "SELECT event_type, actor, from_status, to_status, message_id, detail "
            "FROM pedidos.saga_audit WHERE saga_id = :s ORDER BY id DESC LIMIT 1"),
            {"s": row.saga_id})).one()
        assert tuple(last) == ("Probe", "test", "CANCELADA_SIN_STOCK", "TIMED_OUT", "m-1",
                               {"k": 1})


async def test_an_order_is_created_with_its_saga_and_history_or_not_at_all(
        running_stack: None) -> None:
    key = f"probe-{uuid.uuid4()}"
    body = order_body([(new_sku(), 1)])
    async with db.probe() as conn:

        async def create(body: dict = body) -> tuple[bool, uuid.UUID]:
            saga_id = uuid.uuid4()
            created = await creation_write(
                order_id=uuid.uuid4(), saga_id=saga_id, body=body,
                total=Decimal("10.00"), idempotency_key=key, request_hash="h",
                context={"probe": True}, step_timeout_s=30, saga_timeout_s=3600,
                audit=AuditEntry("OrdenSolicitada", body["customer_id"])).run(conn, "pedidos")
            return created, saga_id

        async def rows(saga_id: uuid.UUID) -> tuple[int, int, int]:
            return tuple((await conn.execute(text(
                "SELECT (SELECT count(*) FROM pedidos.orders WHERE saga_id = :s), "
                "(SELECT count(*) FROM pedidos.sagas WHERE saga_id = :s "
                "  AND status = 'PENDIENTE_VALIDACION' AND step_deadline_at > now()), "
                "(SELECT count(*) FROM pedidos.saga_audit WHERE saga_id = :s "
                "  AND to_status = 'PENDIENTE_VALIDACION' AND from_status IS NULL)"),
                {"s": saga_id})).one())

        created, first = await create()
        assert created and await rows(first) == (1, 1, 1)
        created, second = await create()  # same idempotency key
        assert not created and await rows(second) == (0, 0, 0)
        # The same key of another customer is that customer's own (migration 0003).
        created, theirs = await create({**body, "customer_id": f"{body['customer_id']}-other"})
        assert created and await rows(theirs) == (1, 1, 1)


async def test_a_cached_transition_statement_writes_each_calls_own_values(saga: Saga) -> None:
    """The transition statement is built once per shape (target status, columns set) and
    cached: two calls of one shape must each write their own values, never the first call's."""
    first = await saga.settled_order(stock=0, status="CANCELADA_SIN_STOCK")
    second = await saga.settled_order(stock=0, status="CANCELADA_SIN_STOCK")
    async with db.probe() as conn:
        for placed, n in ((first, 1), (second, 2)):
            row = await lock_saga(conn, placed["saga_id"])
            assert row is not None
            assert await transition_write(row, OrderStatus.TIMED_OUT, step_timeout_s=None,
                                          audit=AuditEntry(f"Probe{n}", f"actor-{n}", f"m-{n}"),
                                          charge_id=f"ch-{n}",
                                          cancel_reason=f"reason-{n}").run(conn, "pedidos")
        for placed, n in ((first, 1), (second, 2)):
            written = (await conn.execute(text(
                "SELECT o.charge_id, o.cancel_reason, a.event_type, a.actor, a.message_id "
                "FROM pedidos.orders o JOIN pedidos.saga_audit a ON a.saga_id = o.saga_id "
                "WHERE o.saga_id = :s ORDER BY a.id DESC LIMIT 1"),
                {"s": placed["saga_id"]})).one()
            assert tuple(written) == (f"ch-{n}", f"reason-{n}", f"Probe{n}", f"actor-{n}",
                                      f"m-{n}")


async def test_a_transitions_notification_is_written_with_it_or_not_at_all(saga: Saga) -> None:
    placed = await saga.settled_order(stock=0, status="CANCELADA_SIN_STOCK")
    async with db.probe() as conn:
        row = await lock_saga(conn, placed["saga_id"])
        assert row is not None

        async def notifications() -> list[tuple[str, str, str]]:
            return [tuple(r) for r in (await conn.execute(text(
                "SELECT customer_id, kind, message FROM pedidos.notifications "
                "WHERE order_id = :o AND kind = 'TIMED_OUT' ORDER BY id"),
                {"o": row.order_id})).all()]

        stale = dataclasses.replace(row, status=OrderStatus.PENDIENTE_PAGO)
        assert not await transition_write(stale, OrderStatus.TIMED_OUT, step_timeout_s=None,
                                          audit=AuditEntry("Probe", "test"),
                                          notification="too late").run(conn, "pedidos")
        assert await notifications() == [], "a stale decision notifies nobody"
        assert await transition_write(row, OrderStatus.TIMED_OUT, step_timeout_s=None,
                                      audit=AuditEntry("Probe", "test"),
                                      notification="your order timed out").run(conn, "pedidos")
        assert await notifications() == [(row.customer_id, "TIMED_OUT", "your order timed out")]


async def test_an_allocation_is_recorded_once_and_guards_what_was_decided_without_it(
        saga: Saga) -> None:
    """A StockAsignado before the payment sets ``stock_allocated_at`` without moving the saga;
    a write decided on the saga before that (a PagoExitoso that would have left it waiting for
    the allocation) then finds nothing, and so does a second allocation."""
    placed = await saga.settled_order(stock=0, status="CANCELADA_SIN_STOCK")
    async with db.probe() as conn:
        row = await lock_saga(conn, placed["saga_id"])
        assert row is not None and not row.stock_allocated

        assert await allocation_write(row, AuditEntry("StockAsignado", "inventario", "m-1")
                                      ).run(conn, "pedidos")
        allocated = await lock_saga(conn, placed["saga_id"])
        assert allocated is not None and allocated.stock_allocated
        assert allocated.status is OrderStatus.CANCELADA_SIN_STOCK
        assert allocated.step_deadline_at == row.step_deadline_at
        last = (await conn.execute(text(
            "SELECT event_type, from_status, to_status, message_id FROM pedidos.saga_audit "
            "WHERE saga_id = :s ORDER BY id DESC LIMIT 1"), {"s": row.saga_id})).one()
        assert tuple(last) == ("StockAsignado", "CANCELADA_SIN_STOCK", "CANCELADA_SIN_STOCK",
                               "m-1")

        assert not await allocation_write(row, AuditEntry("StockAsignado", "inventario")
                                          ).run(conn, "pedidos"), "recorded once"
        assert not await transition_write(row, OrderStatus.TIMED_OUT, step_timeout_s=None,
                                          audit=AuditEntry("Probe", "test")
                                          ).run(conn, "pedidos"), (
            "decided without the allocation: its guard finds nothing")
        assert await transition_write(allocated, OrderStatus.TIMED_OUT, step_timeout_s=None,
                                      audit=AuditEntry("Probe", "test")).run(conn, "pedidos")


async def test_a_step_with_a_latest_deadline_falls_due_at_the_earlier_of_the_two(
        saga: Saga) -> None:
    """The payment step of a saga whose units inventario holds until a time (reserve_then_pay)
    falls due before they are released, however little of its timeout that leaves; the
    history says when. Without the cap it would fall due a whole timeout from now."""
    placed = await saga.settled_order(stock=0, status="CANCELADA_SIN_STOCK")
    async with db.probe() as conn:
        db_now = (await conn.execute(text("SELECT now()"))).scalar_one()
        for by, expected in ((db_now + timedelta(seconds=7), db_now + timedelta(seconds=7)),
                             (db_now + timedelta(hours=1), db_now + timedelta(seconds=60))):
            row = await lock_saga(conn, placed["saga_id"])
            assert row is not None
            assert await transition_write(row, OrderStatus.PENDIENTE_PAGO, step_timeout_s=60.0,
                                          audit=AuditEntry("StockVerificado", "test"),
                                          step_deadline_by=by).run(conn, "pedidos")
            deadline, detail = (await conn.execute(text(
                "SELECT s.step_deadline_at, a.detail FROM pedidos.sagas s JOIN "
                "pedidos.saga_audit a USING (saga_id) WHERE s.saga_id = :s "
                "ORDER BY a.id DESC LIMIT 1"), {"s": row.saga_id})).one()
            assert deadline == expected
            assert datetime.fromisoformat(detail["step_deadline_at"]) == expected
