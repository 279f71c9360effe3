"""An operator's action is written with the transition it made, by the same commit statement,
or not at all: against real PostgreSQL, in a probe's transaction that is rolled back."""

from __future__ import annotations

import dataclasses

from sqlalchemy import text

from pedidos.adapters.order_repository import lock_saga, transition_write
from pedidos.domain.order import OrderStatus
from pedidos.usecases.ports import AuditEntry, OperatorAction
from saga_harness import db
from saga_harness.clients import Saga


async def test_the_action_is_written_with_its_transition_or_not_at_all(saga: Saga) -> None:
    placed = await saga.settled_order(stock=0, status="CANCELADA_SIN_STOCK")
    action = OperatorAction("ops-ana", "saga_cancelled", "customer called", {"k": 1})
    async with db.probe() as conn:
        row = await lock_saga(conn, placed["saga_id"])
        assert row is not None

        async def actions() -> list[tuple[str, ...]]:
            return [tuple(r) for r in await conn.execute(text(
                "SELECT operator, action, saga_id, target, reason, detail::text "
                "FROM pedidos.operator_actions WHERE saga_id = :s"), {"s": row.saga_id})]

        stale = dataclasses.replace(row, status=OrderStatus.PENDIENTE_PAGO)
        assert not await transition_write(
            stale, OrderStatus.CANCELADA_POR_USUARIO, step_timeout_s=None,
            audit=AuditEntry("CancelacionSolicitada", "operator:ops-ana"),
            operator_action=action).run(conn, "pedidos")
        assert await actions() == []

        assert await transition_write(
            row, OrderStatus.TIMED_OUT, step_timeout_s=None,
            audit=AuditEntry("Probe", "operator:ops-ana"),
            operator_action=action).run(conn, "pedidos")
        assert await actions() == [("ops-ana", "saga_cancelled", row.saga_id, row.saga_id,
                                    "customer called", '{"k": 1}')]


async def test_the_service_cannot_rewrite_or_delete_an_operator_action(
        running_stack: None) -> None:
    import asyncpg
    import pytest

    from saga_harness import config

    for service in ("pedidos", "inventario", "pagos"):
        conn = await asyncpg.connect(config.role_dsn(service))
        try:
            for statement in (f"UPDATE {service}.operator_actions SET reason = 'x'",
                              f"DELETE FROM {service}.operator_actions"):
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await conn.execute(statement)
        finally:
            await conn.close()
