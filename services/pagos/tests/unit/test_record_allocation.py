"""record_allocation: a StockAsignado records on the payment that its stock was allocated, so
that a FalloAsignacion for the saga refunds nothing from then on; and the orders in which
inventario's two answers can reach pagos, whether its contract allows them or not."""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import REGISTRY

from pagos.domain.payment import PaymentStatus
from pagos.usecases.compensate_payment import (
    compensate_allocation_failure,
    compensate_order_cancellation,
)
from pagos.usecases.record_allocation import record_allocation
from saga_contracts.events.inventory import StockAsignado
from saga_harness.events import fallo_asignacion, orden_cancelada, stock_asignado
from sagakit.message import Message

from .fakes import FakeCalls, FakePayments, FakeUnit, PaymentTable

S = PaymentStatus


def _ids() -> tuple[str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4())


def _refused(reason: str) -> float:
    return REGISTRY.get_sample_value("saga_refund_refused_total",
                                     {"service": "pagos", "reason": reason}) or 0.0


def _contradicted() -> float:
    return REGISTRY.get_sample_value("saga_alerts_total", {
        "service": "pagos", "alert": "allocation_contradicted", "severity": "critical"}) or 0.0


async def _allocated(table: PaymentTable, event: Message[StockAsignado]) -> FakeUnit:
    """As the consumer runs the handler: reading outside a transaction."""
    uow = FakeUnit(table, reads_outside_transaction=True)
    await record_allocation(uow, FakePayments(table, uow), event)
    return uow


async def _allocation_failed(table: PaymentTable, saga_id: str, order_id: str
                             ) -> tuple[FakeUnit, FakeCalls]:
    uow, calls = FakeUnit(table), FakeCalls()
    await compensate_allocation_failure(uow, FakePayments(table, uow), calls.kick,
                                        fallo_asignacion(saga_id, order_id))
    return uow, calls


async def test_stock_allocated_then_an_allocation_failure_refunds_nothing() -> None:
    """The forged (or out-of-contract) FalloAsignacion of the review: the goods stay allocated,
    so the charge stands; the refusal is counted, and the message is still processed."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1", charge_sent=True)
    uow = await _allocated(table, stock_asignado(saga_id, order_id))
    assert uow.committed and row.stock_allocated and row.status is S.CAPTURED
    before = _refused("stock_allocated")
    failed, calls = await _allocation_failed(table, saga_id, order_id)
    assert row.status is S.CAPTURED and row.next_attempt_at is None
    assert not row.allocation_failed, "a refused failure is not recorded as inventario's answer"
    assert failed.committed and failed.emitted == [] and calls.kicks == 0
    assert _refused("stock_allocated") == before + 1


async def test_an_allocation_failure_then_stock_allocated_lets_the_refund_go_on_and_alerts(
        ) -> None:
    """Out of contract (inventario answers once), and which answer is genuine cannot be told:
    pedidos goes on cancelling the order with its refund, and so does pagos; the allocation is
    recorded and a person is paged to settle the stock."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1", charge_sent=True)
    await _allocation_failed(table, saga_id, order_id)
    assert row.status is S.REFUNDING and row.allocation_failed
    before = _contradicted()
    uow = await _allocated(table, stock_asignado(saga_id, order_id))
    assert uow.committed and row.stock_allocated
    assert row.status is S.REFUNDING, "the refund already started is not stopped"
    assert _contradicted() == before + 1


async def test_stock_allocated_after_the_refund_was_made_still_alerts() -> None:
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.REFUNDED, order_id=order_id, charge_id="ch_1",
                    allocation_failed=True)
    before = _contradicted()
    await _allocated(table, stock_asignado(saga_id, order_id))
    assert row.status is S.REFUNDED and row.stock_allocated
    assert _contradicted() == before + 1


async def test_a_duplicate_stock_allocated_changes_nothing() -> None:
    """The same message delivered again (the inbox refuses it at commit), or a second one."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1")
    event = stock_asignado(saga_id, order_id)
    await _allocated(table, event)
    before = _contradicted()
    for again in (event, stock_asignado(saga_id, order_id)):
        uow = await _allocated(table, again)
        assert uow.committed and uow.staged is None, "nothing written but the inbox row"
    assert row.stock_allocated and row.status is S.CAPTURED
    assert _contradicted() == before


async def test_stock_allocated_for_an_unknown_saga_is_left() -> None:
    """As a FalloAsignacion for a saga with no payment: nothing to record on, nothing created,
    the message processed (not dead-lettered)."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    uow = await _allocated(table, stock_asignado(saga_id, order_id))
    assert table.rows == {} and uow.committed and uow.staged is None


@pytest.mark.parametrize("status", [S.CHARGING, S.CHARGE_FAILED, S.CANCEL_REQUESTED,
                                    S.CANCELLED, S.DECLINED])
async def test_stock_allocated_for_a_charge_never_captured_is_not_believed(
        status: PaymentStatus) -> None:
    """inventario allocates only after PagoExitoso: one before it is not inventario's answer to
    this charge, and recording it would keep the genuine FalloAsignacion from refunding."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, status, order_id=order_id, token="tok_visa")
    uow = await _allocated(table, stock_asignado(saga_id, order_id))
    assert uow.committed and not row.stock_allocated


async def test_a_forged_early_allocation_does_not_keep_a_later_failure_from_refunding() -> None:
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CHARGING, order_id=order_id, token="tok_visa", charge_sent=True)
    await _allocated(table, stock_asignado(saga_id, order_id))
    row.status, row.charge_id, row.token = S.CAPTURED, "ch_1", None  # the charge is approved
    _, calls = await _allocation_failed(table, saga_id, order_id)
    assert row.status is S.REFUNDING and calls.kicks == 1


async def test_stock_allocated_for_another_order_is_not_recorded() -> None:
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1")
    uow = await _allocated(table, stock_asignado(saga_id, str(uuid.uuid4())))
    assert uow.committed and not row.stock_allocated


async def test_the_order_id_is_compared_in_either_case() -> None:
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1")
    await _allocated(table, stock_asignado(saga_id, order_id.upper()))
    assert row.stock_allocated


async def test_a_payment_moved_between_the_read_and_the_write_writes_nothing() -> None:
    """A cancellation (another topic) moves the payment while the handler decides: its guarded
    write finds the status gone, nothing is written (inbox row included) and the consumer
    handles the message again, on the payment as it is now."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1")

    def cancelled() -> None:
        row.status = S.REFUNDING
        table.before_commit = None
    table.before_commit = cancelled
    event = stock_asignado(saga_id, order_id)
    uow = await _allocated(table, event)
    assert not uow.committed and not row.stock_allocated
    again = await _allocated(table, event)
    assert again.committed and row.stock_allocated and row.status is S.REFUNDING


async def test_a_cancellation_after_the_allocation_is_still_refunded() -> None:
    """pedidos cancels only an order it has not completed (a cancel after COMPLETADA is a 409),
    e.g. its allocation step's deadline passed while inventario allocated; inventario puts the
    stock back on the same OrdenCancelada, so the charge is undone."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1", charge_sent=True)
    await _allocated(table, stock_asignado(saga_id, order_id))
    uow, calls = FakeUnit(table), FakeCalls()
    await compensate_order_cancellation(uow, FakePayments(table, uow), calls.kick,
                                        orden_cancelada(saga_id, order_id))
    assert row.status is S.REFUNDING and calls.kicks == 1


async def test_an_allocation_failure_for_a_payment_cancelled_and_allocated_is_counted() -> None:
    """The refund of the cancellation goes on; the FalloAsignacion itself is out of contract."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.REFUNDING, order_id=order_id, charge_id="ch_1",
                    stock_allocated=True, next_attempt_at=table.now)
    before = _refused("stock_allocated")
    _, calls = await _allocation_failed(table, saga_id, order_id)
    assert row.status is S.REFUNDING and calls.kicks == 0
    assert _refused("stock_allocated") == before + 1
