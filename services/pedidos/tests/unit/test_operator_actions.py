"""An operator's cancellation and step retry on in-memory storage: each is audited as an
operator action (who, what, why) in the same commit as the change it made, and an action that
is refused writes neither."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pedidos.config import PedidosSettings
from pedidos.domain.order import CannotCancel, CannotRetry, OrderStatus
from pedidos.usecases.cancel_saga import SAGA_CANCELLED, cancel_saga
from pedidos.usecases.ports import OperatorAction, SagaState
from pedidos.usecases.retry_step import STEP_RETRIED, RequestGone, retry_step
from saga_harness import sealing

from .fakes import ORDER_BODY, OrderTables, unit

S = OrderStatus


def _order_request(saga: SagaState) -> dict[str, Any]:
    """OrdenSolicitada's payload as pedidos emitted it, its token sealed for the charge."""
    token = sealing.sealed("tok_visa", sealing.charge(saga_id=saga.saga_id,
                                                      order_id=saga.order_id))
    return {"order_id": saga.order_id, "customer_id": saga.customer_id,
            "items": ORDER_BODY["items"], "total_amount": "10.00", "currency": "USD",
            "shipping_address": ORDER_BODY["shipping_address"],
            "payment_method": {"type": "credit_card", "token": token}}


async def test_an_operators_cancellation_is_audited_with_its_reason() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    uow, orders = unit(tables)
    action = OperatorAction("ops-ana", SAGA_CANCELLED, "customer called: duplicate order")

    await cancel_saga(uow, orders, saga.saga_id, "operator:ops-ana", PedidosSettings(),
                      operator_action=action)

    assert tables.sagas[saga.saga_id].status is S.CANCELADA_POR_USUARIO
    assert tables.operator_actions == [(saga.saga_id, action)]
    assert uow.commits == 1


async def test_a_refused_cancellation_audits_nothing() -> None:
    tables = OrderTables()
    saga = tables.seed(S.COMPLETADA)
    uow, orders = unit(tables)
    with pytest.raises(CannotCancel):
        await cancel_saga(uow, orders, saga.saga_id, "operator:ops", PedidosSettings(),
                          operator_action=OperatorAction("ops", SAGA_CANCELLED, "why"))
    assert tables.operator_actions == [] and not uow.committed


async def test_a_cancellation_that_lost_a_race_audits_nothing() -> None:
    """The saga moved on between the lock and the commit (as a guard failing shows it)."""
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    uow, orders = unit(tables)
    real_lock = orders.lock

    async def lock_then_move(saga_id: str, skip_locked: bool = False) -> SagaState | None:
        read = await real_lock(saga_id, skip_locked)
        tables.move_elsewhere(saga_id, S.CANCELADA_SIN_STOCK)
        return read

    orders.lock = lock_then_move  # type: ignore[method-assign]
    await cancel_saga(uow, orders, saga.saga_id, "operator:ops", PedidosSettings(),
                      operator_action=OperatorAction("ops", SAGA_CANCELLED, "why"))
    assert tables.operator_actions == []
    assert tables.sagas[saga.saga_id].status is S.CANCELADA_SIN_STOCK


async def test_retrying_validation_sends_the_order_again_under_a_new_message_id() -> None:
    tables, settings = OrderTables(), PedidosSettings()
    saga = tables.seed(S.PENDIENTE_VALIDACION, step_deadline_in_s=1.0, started_s_ago=25)
    tables.requests[saga.saga_id] = _order_request(saga)
    tables.advance(10)
    uow, orders = unit(tables)

    sent = await retry_step(uow, orders, saga.saga_id,
                            OperatorAction("ops-ana", STEP_RETRIED, "inventario was down"),
                            settings)

    [again] = uow.emitted
    assert (again.event_type, again.message_id, again.saga_id) == (
        "OrdenSolicitada", sent, saga.saga_id)
    assert again.payload == tables.requests[saga.saga_id], "the same request, token sealed"
    assert again.metadata["channel"] == "operator"
    now = tables.sagas[saga.saga_id]
    assert now.status is S.PENDIENTE_VALIDACION
    assert now.step_deadline_at == tables.now + timedelta(seconds=settings.validation_timeout_s)
    [(where, action)] = tables.operator_actions
    assert (where, action.operator, action.action, action.reason) == (
        saga.saga_id, "ops-ana", STEP_RETRIED, "inventario was down")
    assert action.detail == {"step": "validacion", "message_id": sent}
    [entry] = tables.history_of(saga.saga_id)
    assert (entry.event_type, entry.actor, entry.from_status, entry.to_status) == (
        "ReintentoSolicitado", "operator:ops-ana", "PENDIENTE_VALIDACION",
        "PENDIENTE_VALIDACION")


@pytest.mark.parametrize("status", [S.PENDIENTE_PAGO, S.PENDIENTE_ASIGNACION,
                                    S.PENDIENTE_REEMBOLSO, S.COMPLETADA,
                                    S.CANCELADA_TIMEOUT])
async def test_a_step_pedidos_cannot_drive_is_not_retried(status: OrderStatus) -> None:
    tables = OrderTables()
    saga = tables.seed(status)
    tables.requests[saga.saga_id] = _order_request(saga)
    uow, orders = unit(tables)
    with pytest.raises(CannotRetry) as refused:
        await retry_step(uow, orders, saga.saga_id,
                         OperatorAction("ops", STEP_RETRIED, "why"), PedidosSettings())
    assert refused.value.status is status
    assert uow.emitted == [] and tables.operator_actions == [] and not uow.committed


async def test_without_its_order_request_nothing_is_retried() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    uow, orders = unit(tables)
    with pytest.raises(RequestGone):
        await retry_step(uow, orders, saga.saga_id,
                         OperatorAction("ops", STEP_RETRIED, "why"), PedidosSettings())
    assert uow.emitted == [] and tables.operator_actions == []
