"""stage_transition, shared by every path that moves a saga: the move is staged with its
history, notification and events, and only what commits counts (the finished-saga metrics); a
move whose guard fails leaves no trace."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import REGISTRY

from pedidos.config import PedidosSettings
from pedidos.domain.order import SAGA_TYPE, CancelReason, OrderStatus, RefundStatus, Transition
from pedidos.usecases.transitions import stage_transition

from .fakes import OrderTables, unit

S = OrderStatus


def _finished(status: OrderStatus) -> float:
    return REGISTRY.get_sample_value("sagas_finished_total",
                                     {"saga_type": SAGA_TYPE, "status": status.value}) or 0.0


async def test_an_active_step_gets_its_own_deadline() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO, started_s_ago=10)
    tables.advance(2)
    uow, orders = unit(tables)
    stage_transition(uow, orders, saga, Transition(S.PENDIENTE_ASIGNACION), cause="PagoExitoso",
                     actor="pagos", settings=PedidosSettings(),
                     order_values={"charge_id": "ch_1"})
    assert tables.sagas[saga.saga_id].status is S.PENDIENTE_PAGO, "staged, not written yet"
    assert await uow.commit()

    moved = tables.sagas[saga.saga_id]
    assert moved.status is S.PENDIENTE_ASIGNACION
    assert moved.step_started_at == tables.now, "the commit's clock"
    assert moved.step_deadline_at == tables.now + timedelta(
        seconds=PedidosSettings().allocation_timeout_s)
    assert tables.order_of(saga.saga_id).charge_id == "ch_1"
    assert uow.emitted == [] and tables.notifications == []


async def test_cancel_reason_and_refund_status_are_written_on_the_order() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_REEMBOLSO)
    finished = _finished(S.CANCELADA_CON_REEMBOLSO)
    uow, orders = unit(tables)
    stage_transition(uow, orders, saga,
                     Transition(S.CANCELADA_CON_REEMBOLSO, CancelReason.FALLO_ASIGNACION,
                                RefundStatus.REFUNDED),
                     cause="ReembolsoEjecutado", actor="pagos", settings=PedidosSettings())
    assert _finished(S.CANCELADA_CON_REEMBOLSO) == finished, "counted only once committed"
    assert await uow.commit()

    order = tables.order_of(saga.saga_id)
    assert (order.status, order.cancel_reason, order.refund_status) == (
        "CANCELADA_CON_REEMBOLSO", "fallo_asignacion", "REFUNDED")
    assert _finished(S.CANCELADA_CON_REEMBOLSO) == finished + 1
    [notice] = tables.notifications
    assert notice.message.startswith("Tu pago ha sido reembolsado")


async def test_a_move_whose_guard_fails_leaves_no_trace() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_ASIGNACION)
    tables.move_elsewhere(saga.saga_id, S.CANCELADA_TIMEOUT)
    finished = _finished(S.COMPLETADA)
    uow, orders = unit(tables)
    stage_transition(uow, orders, saga, Transition(S.COMPLETADA), cause="StockAsignado",
                     actor="inventario", settings=PedidosSettings())

    assert not await uow.commit()

    assert uow.emitted == [], "OrdenCompletada is not written"
    assert tables.history == [] and tables.notifications == []
    assert tables.sagas[saga.saga_id].status is S.CANCELADA_TIMEOUT
    assert _finished(S.COMPLETADA) == finished
