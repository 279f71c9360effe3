"""cancel_saga on in-memory storage: an active saga, locked, is cancelled with its order, its
history, the customer's notification and OrdenCancelada (the participants compensate on it); a
terminal or compensating saga is refused with its status, an unknown one (or, for a customer,
another customer's) is not found, and neither writes anything."""

from __future__ import annotations

import uuid

import pytest

from pedidos.config import PedidosSettings
from pedidos.domain.order import CannotCancel, OrderStatus
from pedidos.usecases.cancel_saga import SagaNotFound, cancel_saga
from sagakit.envelope import new_span_id

from .fakes import OrderTables, unit

S = OrderStatus


@pytest.mark.parametrize("status", [S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO,
                                    S.PENDIENTE_ASIGNACION])
async def test_an_active_saga_is_cancelled_with_its_order_history_and_event(
        status: OrderStatus) -> None:
    tables, span = OrderTables(), new_span_id()
    saga = tables.seed(status)
    uow, orders = unit(tables)

    assert await cancel_saga(uow, orders, saga.saga_id, "api", PedidosSettings(),
                             request_span_id=span) is S.CANCELADA_POR_USUARIO

    assert tables.locks == 1 and tables.reads == 0, "decided under the saga's lock"
    assert uow.committed and uow.commits == 1
    now = tables.sagas[saga.saga_id]
    assert now.status is S.CANCELADA_POR_USUARIO and now.step_deadline_at is None
    order = tables.order_of(saga.saga_id)
    assert (order.status, order.cancel_reason) == ("CANCELADA_POR_USUARIO",
                                                   "cancelada_por_usuario")
    [entry] = tables.history_of(saga.saga_id)
    assert (entry.event_type, entry.actor, entry.from_status, entry.to_status) == (
        "CancelacionSolicitada", "api", status.value, "CANCELADA_POR_USUARIO")
    [notice] = tables.notifications
    assert (notice.kind, notice.message) == ("CANCELADA_POR_USUARIO",
                                             "Tu orden fue cancelada a tu pedido")
    [cancelled] = uow.emitted
    assert (cancelled.event_type, cancelled.saga_id, cancelled.parent_span_id) == (
        "OrdenCancelada", saga.saga_id, span)
    assert cancelled.payload == {"order_id": saga.order_id, "status": "CANCELADA_POR_USUARIO",
                                 "reason": "cancelada_por_usuario"}


async def test_a_cancellation_outside_a_request_still_has_a_parent_span() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    uow, orders = unit(tables)
    await cancel_saga(uow, orders, saga.saga_id, "ops", PedidosSettings())
    [cancelled] = uow.emitted
    assert cancelled.parent_span_id and uuid.UUID(cancelled.parent_span_id)
    assert tables.history_of(saga.saga_id)[0].actor == "ops"


@pytest.mark.parametrize("status", [S.PENDIENTE_REEMBOLSO, S.COMPLETADA,
                                    S.CANCELADA_SIN_STOCK, S.TIMED_OUT])
async def test_a_terminal_or_compensating_saga_cannot_be_cancelled(status: OrderStatus) -> None:
    tables = OrderTables()
    saga = tables.seed(status)
    uow, orders = unit(tables)
    with pytest.raises(CannotCancel) as refused:
        await cancel_saga(uow, orders, saga.saga_id, "api", PedidosSettings())
    assert refused.value.status is status
    assert uow.commits == 0 and uow.emitted == []
    assert tables.sagas[saga.saga_id].status is status and tables.history == []


async def test_an_unknown_saga_is_not_found() -> None:
    tables = OrderTables()
    uow, orders = unit(tables)
    with pytest.raises(SagaNotFound):
        await cancel_saga(uow, orders, str(uuid.uuid4()), "api", PedidosSettings())
    assert uow.commits == 0 and uow.emitted == []


async def test_another_customers_saga_is_not_found_and_left_as_it_is() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    uow, orders = unit(tables)
    with pytest.raises(SagaNotFound):
        await cancel_saga(uow, orders, saga.saga_id, f"customer:{saga.customer_id}-other",
                          PedidosSettings(), customer_id=f"{saga.customer_id}-other")
    assert uow.commits == 0 and uow.emitted == []
    assert tables.sagas[saga.saga_id].status is S.PENDIENTE_PAGO and tables.history == []


async def test_a_customer_cancels_its_own_saga() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    uow, orders = unit(tables)
    assert await cancel_saga(uow, orders, saga.saga_id, f"customer:{saga.customer_id}",
                             PedidosSettings(), customer_id=saga.customer_id) is (
        S.CANCELADA_POR_USUARIO)
    assert tables.history_of(saga.saga_id)[0].actor == f"customer:{saga.customer_id}"
    [cancelled] = uow.emitted
    assert cancelled.metadata["user_id"] == saga.customer_id, "pagos learns whose payment"
