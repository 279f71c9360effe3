"""track_saga on in-memory storage: each participant's event moves the saga as the state
machine decides, or is recorded without moving it; a saga moved elsewhere after it was read
fails the write's guard, and the consumer's retry decides on it again. A PagoExitoso that does
not pay the order's total in its currency is recorded as ignored and counted, whatever the
saga's status."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest

from pedidos import metrics as pedidos_metrics
from pedidos.config import RESERVATION_MARGIN_S, PedidosSettings
from pedidos.domain.order import TERMINAL, OrderStatus
from pedidos.usecases.ports import SagaState
from pedidos.usecases.track_saga import track_saga
from sagakit.context import current_message
from sagakit.errors import PermanentError
from sagakit.message import Message

from .fakes import FakeUnitOfWork, OrderTables, event, unit

S = OrderStatus


@contextmanager
def handling(event: Message[Any]) -> Iterator[None]:
    """As the consumer runs a handler: the message being handled is the events' cause."""
    token = current_message.set(event.envelope)
    try:
        yield
    finally:
        current_message.reset(token)


async def _track(tables: OrderTables, event: Message[Any], stale: tuple[SagaState, ...] = ()
                 ) -> FakeUnitOfWork:
    """The handler once; ``stale``: sagas it reads as given, moved since (``FakeOrderStore``)."""
    uow, orders = unit(tables, stale)
    with handling(event):
        await track_saga(uow, orders, event, PedidosSettings())
    return uow


async def test_stock_verified_moves_the_saga_on_to_payment_read_once() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    verified = event("StockVerificado", saga)

    uow = await _track(tables, verified)

    assert uow.committed and uow.commits == 1 and uow.emitted == []
    assert tables.reads == 1 and tables.locks == 0, "read without a lock"
    now = tables.sagas[saga.saga_id]
    assert now.status is S.PENDIENTE_PAGO and tables.order_of(saga.saga_id).status == (
        "PENDIENTE_PAGO")
    assert now.step_deadline_at == tables.now + timedelta(
        seconds=PedidosSettings().payment_timeout_s)
    [entry] = tables.history_of(saga.saga_id)
    assert (entry.event_type, entry.actor, entry.from_status, entry.to_status,
            entry.message_id, entry.detail) == (
        "StockVerificado", "inventario", "PENDIENTE_VALIDACION", "PENDIENTE_PAGO",
        verified.message_id, {"source_service": "inventario"})


async def test_the_history_shows_which_allocation_strategy_inventario_ran() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    until = "2026-01-01T12:05:00.000000Z"
    await _track(tables, event("StockVerificado", saga, {
        "allocation_strategy": "reserve_then_pay", "reserved_until": until}))

    [entry] = tables.history_of(saga.saga_id)
    assert entry.detail == {"source_service": "inventario",
                            "allocation_strategy": "reserve_then_pay", "reserved_until": until,
                            "step_deadline_at": "2026-01-01T12:01:00+00:00"}


@pytest.mark.parametrize(("held_for_s", "payment_step_s"), [
    (60.0, 60.0 - RESERVATION_MARGIN_S),    # reserved late in the validation step: cut short
    (40.0, 40.0 - RESERVATION_MARGIN_S),
    (20.0, 20.0 - RESERVATION_MARGIN_S),    # already past: the deadline scan cancels it
    (600.0, 60.0),                          # held long enough: the whole payment step
])
async def test_the_payment_step_falls_due_before_the_units_reserved_for_it_are_released(
        held_for_s: float, payment_step_s: float) -> None:
    """inventario holds the units until ``reserved_until``, counted from its reservation, which
    may come late in the validation step: the payment step ends ``RESERVATION_MARGIN_S``
    before it at the latest, so a payment made within the step is never refunded for units
    released under it."""
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    until = tables.now + timedelta(seconds=held_for_s)
    await _track(tables, event("StockVerificado", saga, {
        "allocation_strategy": "reserve_then_pay",
        "reserved_until": until.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}))

    assert PedidosSettings().payment_timeout_s == 60.0
    now = tables.sagas[saga.saga_id]
    assert now.status is S.PENDIENTE_PAGO
    assert now.step_deadline_at == tables.now + timedelta(seconds=payment_step_s)


async def test_stock_allocated_completes_the_order_and_emits_orden_completada() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_ASIGNACION)
    allocated = event("StockAsignado", saga)

    uow = await _track(tables, allocated)

    assert tables.sagas[saga.saga_id].status is S.COMPLETADA
    assert tables.sagas[saga.saga_id].step_deadline_at is None
    [completed] = uow.emitted
    assert completed.event_type == "OrdenCompletada" and completed.saga_id == saga.saga_id
    assert completed.payload == {"order_id": saga.order_id, "total_amount": "10.00",
                                 "currency": "USD"}
    assert completed.parent_span_id == allocated.span_id
    assert completed.metadata["causation_id"] == allocated.message_id
    [notice] = tables.notifications
    assert (notice.order_id, notice.customer_id, notice.kind, notice.message) == (
        saga.order_id, saga.customer_id, "COMPLETADA", "Tu orden ha sido confirmada")


@pytest.mark.parametrize(("status", "event_type", "to", "reason"), [
    (S.PENDIENTE_VALIDACION, "StockNoDisponible", S.CANCELADA_SIN_STOCK, "stock_insuficiente"),
    (S.PENDIENTE_VALIDACION, "PrecioRechazado", S.CANCELADA_PRECIO_RECHAZADO,
     "precio_rechazado"),
    (S.PENDIENTE_VALIDACION, "PrecioRechazado_v2", S.CANCELADA_PRECIO_RECHAZADO,
     "precio_rechazado"),
    (S.PENDIENTE_PAGO, "PagoRechazado", S.CANCELADA_PAGO_RECHAZADO, "pago_rechazado"),
    (S.PENDIENTE_REEMBOLSO, "ReembolsoEjecutado", S.CANCELADA_CON_REEMBOLSO,
     "fallo_asignacion"),
    (S.PENDIENTE_REEMBOLSO, "FalloReembolso", S.REEMBOLSO_FALLIDO, "fallo_asignacion"),
])
async def test_an_event_that_cancels_the_order_emits_orden_cancelada_with_its_reason(
        status: OrderStatus, event_type: str, to: OrderStatus, reason: str) -> None:
    tables = OrderTables()
    saga = tables.seed(status)

    uow = await _track(tables, event(event_type, saga))

    assert tables.sagas[saga.saga_id].status is to
    order = tables.order_of(saga.saga_id)
    assert (order.status, order.cancel_reason) == (to.value, reason)
    [cancelled] = uow.emitted
    assert cancelled.event_type == "OrdenCancelada"
    assert cancelled.payload == {"order_id": saga.order_id, "status": to.value,
                                 "reason": reason}
    assert [n.kind for n in tables.notifications] == [to.value]


async def test_an_allocation_failure_waits_for_the_refund_without_cancelling_yet() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_ASIGNACION)

    uow = await _track(tables, event("FalloAsignacion", saga))

    assert tables.sagas[saga.saga_id].status is S.PENDIENTE_REEMBOLSO
    assert tables.order_of(saga.saga_id).refund_status == "PENDING"
    assert uow.emitted == [] and tables.notifications == []


async def test_a_refund_outcome_after_the_order_ended_is_recorded_without_moving_it() -> None:
    tables = OrderTables()
    saga = tables.seed(S.CANCELADA_TIMEOUT, step_deadline_in_s=None)
    refunded = event("ReembolsoEjecutado", saga, source="pagos")

    uow = await _track(tables, refunded)

    assert uow.committed and uow.emitted == []
    assert tables.sagas[saga.saga_id].status is S.CANCELADA_TIMEOUT
    order = tables.order_of(saga.saga_id)
    assert (order.status, order.refund_status) == ("CANCELADA_TIMEOUT", "REFUNDED")
    [entry] = tables.history_of(saga.saga_id)
    assert (entry.from_status, entry.to_status, entry.detail) == (
        "CANCELADA_TIMEOUT", "CANCELADA_TIMEOUT",
        {"source_service": "pagos", "ignored": False, "refund_status": "REFUNDED"})


async def test_a_stale_or_duplicate_event_is_recorded_as_ignored_and_changes_nothing() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_ASIGNACION)
    late = event("StockVerificado", saga)

    uow = await _track(tables, late)

    assert uow.committed and uow.emitted == [] and tables.notifications == []
    assert tables.sagas[saga.saga_id].status is S.PENDIENTE_ASIGNACION
    assert tables.sagas[saga.saga_id].step_deadline_at == saga.step_deadline_at
    [entry] = tables.history_of(saga.saga_id)
    assert (entry.event_type, entry.from_status, entry.to_status, entry.message_id,
            entry.detail) == ("StockVerificado", "PENDIENTE_ASIGNACION",
                              "PENDIENTE_ASIGNACION", late.message_id,
                              {"source_service": "inventario", "ignored": True})


async def test_a_late_payment_on_an_ended_order_still_records_its_charge() -> None:
    tables = OrderTables()
    saga = tables.seed(S.CANCELADA_POR_USUARIO, step_deadline_in_s=None)

    await _track(tables, event("PagoExitoso", saga, {"charge_id": "ch_9"}, source="pagos"))

    order = tables.order_of(saga.saga_id)
    assert (order.status, order.charge_id) == ("CANCELADA_POR_USUARIO", "ch_9")
    assert tables.history_of(saga.saga_id)[0].detail["ignored"] is True


@pytest.mark.parametrize("status", [S.PENDIENTE_PAGO, S.CANCELADA_POR_USUARIO])
async def test_a_declined_payment_is_recorded_on_the_order_whatever_became_of_it(
        status: OrderStatus) -> None:
    """The decline limits count declines, not orders that ended declined: an order its
    customer cancelled before pedidos heard the decline still records it."""
    tables = OrderTables()
    saga = tables.seed(status, step_deadline_in_s=None if status in TERMINAL else 60)
    declined = event("PagoRechazado", saga, source="pagos")

    await _track(tables, declined)

    assert tables.order_of(saga.saga_id).payment_declined_at == datetime.fromisoformat(
        declined.envelope.timestamp)


async def test_an_event_of_an_unknown_saga_is_refused_for_good() -> None:
    tables = OrderTables()
    ghost = tables.seed(S.PENDIENTE_VALIDACION)
    del tables.sagas[ghost.saga_id]
    uow, orders = unit(tables)
    with pytest.raises(PermanentError):
        await track_saga(uow, orders, event("StockVerificado", ghost), PedidosSettings())
    assert uow.commits == 0


async def test_a_saga_moved_elsewhere_since_it_was_read_is_decided_on_again() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    # Another instance cancels it after this handler read it.
    tables.move_elsewhere(saga.saga_id, S.CANCELADA_POR_USUARIO)
    history = len(tables.history)

    paid = event("PagoExitoso", saga, {"charge_id": "ch_2"}, source="pagos")
    uow = await _track(tables, paid, stale=(saga,))

    assert uow.commits == 1 and not uow.committed, "the guard found the status gone"
    assert len(tables.history) == history and tables.order_of(saga.saga_id).charge_id is None

    retry = await _track(tables, paid)
    assert retry.committed
    assert tables.sagas[saga.saga_id].status is S.CANCELADA_POR_USUARIO
    assert tables.history[-1].detail["ignored"] is True
    assert tables.order_of(saga.saga_id).charge_id == "ch_2"


async def test_a_transition_decided_on_a_stale_saga_writes_no_event() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_ASIGNACION)
    tables.move_elsewhere(saga.saga_id, S.CANCELADA_TIMEOUT)

    uow = await _track(tables, event("StockAsignado", saga), stale=(saga,))

    assert not uow.committed and uow.emitted == [], "no OrdenCompletada for a cancelled order"
    assert tables.sagas[saga.saga_id].status is S.CANCELADA_TIMEOUT
    assert tables.notifications == []


async def test_a_commit_that_fails_raises_and_writes_nothing() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    uow, orders = unit(tables)
    uow.fail_commit = ConnectionResetError("database went away")
    with pytest.raises(ConnectionResetError):
        await track_saga(uow, orders, event("StockVerificado", saga), PedidosSettings())
    assert tables.sagas[saga.saga_id].status is S.PENDIENTE_VALIDACION


def _mismatches(reason: str) -> float:
    return pedidos_metrics.PAYMENT_MISMATCHES.labels("pedidos", reason)._value.get()


@pytest.mark.parametrize("status", [S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO,
                                    S.PENDIENTE_ASIGNACION, S.CANCELADA_POR_USUARIO])
@pytest.mark.parametrize(("paid", "reason"), [
    ({"amount": "9.99", "currency": "USD"}, "amount_mismatch"),
    ({"amount": "10.00", "currency": "EUR"}, "currency_mismatch"),
])
async def test_a_payment_other_than_the_orders_is_recorded_as_ignored_and_counted(
        status: OrderStatus, paid: dict[str, str], reason: str,
        caplog: pytest.LogCaptureFixture) -> None:
    tables = OrderTables()
    saga = tables.seed(status)
    foreign = event("PagoExitoso", saga, {"charge_id": "ch_other", **paid}, source="pagos")
    before = _mismatches(reason)

    with caplog.at_level(logging.WARNING, logger="pedidos.track_saga"):
        uow = await _track(tables, foreign)

    assert uow.committed and uow.emitted == [] and tables.notifications == []
    assert tables.sagas[saga.saga_id] == saga, "neither moved nor its deadline changed"
    order = tables.order_of(saga.saga_id)
    assert (order.status, order.charge_id) == (status.value, None)
    [entry] = tables.history_of(saga.saga_id)
    assert (entry.event_type, entry.from_status, entry.to_status, entry.message_id,
            entry.detail) == ("PagoExitoso", status.value, status.value, foreign.message_id,
                              {"source_service": "pagos", "ignored": True,
                               "payment_mismatch": reason, "paid_amount": paid["amount"],
                               "paid_currency": paid["currency"]})
    assert _mismatches(reason) == before + 1
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage() == f"payment event ignored: {reason}"
    assert warning.saga_id == saga.saga_id  # type: ignore[attr-defined]


async def test_the_orders_payment_is_not_counted_as_a_mismatch() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    before = [_mismatches(r) for r in ("amount_mismatch", "currency_mismatch")]

    await _track(tables, event("PagoExitoso", saga, {"amount": "10.00", "currency": "USD"},
                               source="pagos"))

    assert tables.sagas[saga.saga_id].status is S.PENDIENTE_ASIGNACION
    assert [_mismatches(r) for r in ("amount_mismatch", "currency_mismatch")] == before


async def test_a_mismatch_on_a_saga_moved_meanwhile_is_counted_once_recorded() -> None:
    """The guard finds the saga moved: nothing recorded, nothing counted; the retry records
    and counts it once."""
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    tables.move_elsewhere(saga.saga_id, S.CANCELADA_POR_USUARIO)
    foreign = event("PagoExitoso", saga, {"amount": "1.00"}, source="pagos")
    before = _mismatches("amount_mismatch")

    stale = await _track(tables, foreign, stale=(saga,))
    assert not stale.committed and _mismatches("amount_mismatch") == before

    retry = await _track(tables, foreign)
    assert retry.committed and _mismatches("amount_mismatch") == before + 1
    assert tables.history_of(saga.saga_id)[-1].detail["payment_mismatch"] == "amount_mismatch"
