"""enforce_deadlines on in-memory storage: a saga past its step deadline is cancelled as timed
out (StepTimedOut, then OrdenCancelada), one past the saga's deadline expires (SagaExpirada,
then OrdenCancelada), each in its own unit of work under its lock; a saga another holds, or no
longer due when locked, is left alone; and the scan says when to look again."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from pedidos.config import PedidosSettings
from pedidos.domain.order import OrderStatus
from pedidos.usecases.enforce_deadlines import enforce_deadline, enforce_deadlines

from .fakes import FakeDeadlines, FakeUnits, OrderTables

S = OrderStatus


async def _enforce(tables: OrderTables, saga_id: str) -> tuple[int, FakeUnits]:
    units = FakeUnits(tables)
    done = await enforce_deadline(FakeDeadlines(tables), units, PedidosSettings(), saga_id)
    return done, units


def _step_timeouts(step: str) -> float:
    return REGISTRY.get_sample_value("saga_step_timeouts_total",
                                     {"service": "pedidos", "step": step}) or 0.0


@pytest.mark.parametrize(("status", "step"), [(S.PENDIENTE_VALIDACION, "validacion"),
                                              (S.PENDIENTE_PAGO, "pago"),
                                              (S.PENDIENTE_ASIGNACION, "asignacion")])
async def test_a_step_past_its_deadline_cancels_the_order_as_timed_out(
        status: OrderStatus, step: str) -> None:
    tables = OrderTables()
    saga = tables.seed(status, step_deadline_in_s=-1, started_s_ago=31)
    timeouts = _step_timeouts(step)

    done, units = await _enforce(tables, saga.saga_id)

    assert done == 1
    [uow] = units.opened
    assert uow.committed and uow.commits == 1 and tables.locks == 1
    assert tables.sagas[saga.saga_id].status is S.CANCELADA_TIMEOUT
    assert tables.order_of(saga.saga_id).cancel_reason == "timeout"
    timed_out, cancelled = uow.emitted
    assert (timed_out.event_type, timed_out.payload) == (
        "StepTimedOut", {"order_id": saga.order_id, "step": step, "elapsed_ms": 31000})
    assert (cancelled.event_type, cancelled.payload) == (
        "OrdenCancelada", {"order_id": saga.order_id, "status": "CANCELADA_TIMEOUT",
                           "reason": "timeout"})
    assert timed_out.parent_span_id == cancelled.parent_span_id is not None, (
        "both hang from the deadline check's span")
    [entry] = tables.history_of(saga.saga_id)
    assert (entry.event_type, entry.actor, entry.from_status, entry.to_status, entry.detail) == (
        "StepTimedOut", "pedidos.deadlines", status.value, "CANCELADA_TIMEOUT",
        {"step": step, "elapsed_ms": 31000})
    assert [n.kind for n in tables.notifications] == ["CANCELADA_TIMEOUT"]
    assert _step_timeouts(step) == timeouts + 1


@pytest.mark.parametrize("status", [S.PENDIENTE_PAGO, S.PENDIENTE_REEMBOLSO])
async def test_a_saga_past_its_own_deadline_expires(status: OrderStatus) -> None:
    tables = OrderTables()
    # Past both deadlines: the saga's wins.
    saga = tables.seed(status, step_deadline_in_s=-5, expires_in_s=-1, started_s_ago=7201)

    done, units = await _enforce(tables, saga.saga_id)

    assert done == 1
    [uow] = units.opened
    assert tables.sagas[saga.saga_id].status is S.TIMED_OUT
    expired, cancelled = uow.emitted
    assert (expired.event_type, expired.payload) == (
        "SagaExpirada", {"order_id": saga.order_id, "previous_status": status.value,
                         "elapsed_ms": 7201000})
    assert (cancelled.event_type, cancelled.payload["reason"]) == ("OrdenCancelada",
                                                                   "saga_expirada")
    [entry] = tables.history_of(saga.saga_id)
    assert (entry.event_type, entry.to_status) == ("SagaExpirada", "TIMED_OUT")


async def test_a_refund_past_its_step_deadline_is_left_to_the_sagas_deadline() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_REEMBOLSO, step_deadline_in_s=-1)
    done, units = await _enforce(tables, saga.saga_id)
    assert done == 0
    assert units.opened[0].commits == 0 and units.opened[0].emitted == []
    assert tables.sagas[saga.saga_id].status is S.PENDIENTE_REEMBOLSO


async def test_a_saga_another_transaction_holds_is_skipped() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO, step_deadline_in_s=-1)
    tables.held.add(saga.saga_id)
    done, units = await _enforce(tables, saga.saga_id)
    assert done == 0 and units.opened[0].commits == 0
    assert tables.sagas[saga.saga_id].status is S.PENDIENTE_PAGO


async def test_a_saga_no_longer_due_when_locked_is_left_alone() -> None:
    """Moved on by an event between the scan and the lock: its new step has a new deadline."""
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_ASIGNACION, step_deadline_in_s=15)
    done, units = await _enforce(tables, saga.saga_id)
    assert done == 0 and units.opened[0].commits == 0 and tables.history == []


async def test_a_saga_that_ended_before_it_was_locked_is_left_alone() -> None:
    tables = OrderTables()
    saga = tables.seed(S.COMPLETADA, step_deadline_in_s=-1, expires_in_s=-1)
    done, units = await _enforce(tables, saga.saga_id)
    assert done == 0 and units.opened[0].commits == 0


async def test_the_scan_handles_every_due_saga_and_wakes_for_the_next_deadline() -> None:
    tables, settings = OrderTables(), PedidosSettings()
    due = [tables.seed(S.PENDIENTE_PAGO, step_deadline_in_s=-1),
           tables.seed(S.PENDIENTE_VALIDACION, step_deadline_in_s=-2)]
    waiting = tables.seed(S.PENDIENTE_PAGO, step_deadline_in_s=3.5)
    deadlines, units = FakeDeadlines(tables), FakeUnits(tables)

    again = await enforce_deadlines(deadlines, units, settings)

    assert {tables.sagas[s.saga_id].status for s in due} == {S.CANCELADA_TIMEOUT}
    assert tables.sagas[waiting.saga_id].status is S.PENDIENTE_PAGO
    assert len(units.opened) == 2, "one unit of work per saga"
    assert deadlines.traceparents_read == [due[1].saga_id, due[0].saga_id], (
        "earliest step deadline first")
    assert again.seconds == pytest.approx(3.5 + 0.02)


async def test_with_nothing_to_come_the_scan_sleeps_its_interval() -> None:
    tables, settings = OrderTables(), PedidosSettings()
    tables.seed(S.COMPLETADA, step_deadline_in_s=None)
    again = await enforce_deadlines(FakeDeadlines(tables), FakeUnits(tables), settings)
    assert again.seconds == settings.deadline_scan_interval_s


async def test_a_full_batch_scans_again_at_once() -> None:
    tables = OrderTables()
    for _ in range(3):
        tables.seed(S.PENDIENTE_PAGO, step_deadline_in_s=-1)
    units = FakeUnits(tables)
    again = await enforce_deadlines(FakeDeadlines(tables), units, PedidosSettings(), batch=2)
    assert len(units.opened) == 2
    assert again.seconds == pytest.approx(0.02)
    assert sum(s.status is S.PENDIENTE_PAGO for s in tables.sagas.values()) == 1
