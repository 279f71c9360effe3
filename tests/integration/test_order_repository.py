"""pedidos' transition statement against real PostgreSQL: order, saga and audit row move
together, and a decision taken on a status that is no longer current writes nothing."""

from __future__ import annotations

import dataclasses

from harness import config
from harness.clients import Saga, new_sku, order_body
from pedidos.adapters.order_repository import AuditEntry, OrderRepository
from pedidos.domain.order import OrderStatus
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

URL = config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://")


async def test_a_transition_moves_order_saga_and_history_or_nothing(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 0)
    placed = await saga.place(order_body([(sku, 1)]))
    await saga.wait_status(placed["order_id"], "CANCELADA_SIN_STOCK", timeout=30)
    engine = create_async_engine(URL)
    try:
        async with engine.connect() as conn:
            await conn.begin()
            repo = OrderRepository(conn)
            row = await repo.lock_saga(placed["saga_id"])
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
            assert not await repo.transition(stale, OrderStatus.COMPLETADA, step_timeout_s=None,
                                             audit=AuditEntry("PagoExitoso", "test"))
            assert await history() == before
            assert await statuses() == ("CANCELADA_SIN_STOCK", "CANCELADA_SIN_STOCK")

            assert await repo.transition(row, OrderStatus.TIMED_OUT, step_timeout_s=None,
                                         audit=AuditEntry("Probe", "test", "m-1", {"k": 1}))
            assert await history() == before + 1
            assert await statuses() == ("TIMED_OUT", "TIMED_OUT")
            last = (await conn.execute(text(
                "SELECT event_type, actor, from_status, to_status, message_id, detail "
                "FROM pedidos.saga_audit WHERE saga_id = :s ORDER BY id DESC LIMIT 1"),
                {"s": row.saga_id})).one()
            assert tuple(last) == ("Probe", "test", "CANCELADA_SIN_STOCK", "TIMED_OUT", "m-1",
                                   {"k": 1})
            await conn.rollback()  # a probe: the order keeps its real outcome
    finally:
        await engine.dispose()
