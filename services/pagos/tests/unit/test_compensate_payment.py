"""compensate_payment: OrdenCancelada and FalloAsignacion undo the saga's charge (drop it unsent,
resolve it, or refund it) under the payment's row lock, and a cancellation that finds no payment
records one so a later StockVerificado never charges; a charge created meanwhile in another
lane is decided on, never dropped with the message. One that names another order than the
payment's changes nothing and is counted. (A FalloAsignacion after StockAsignado:
test_record_allocation.)"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from pagos import metrics
from pagos.domain.payment import PaymentStatus
from pagos.usecases.compensate_payment import (
    compensate_allocation_failure,
    compensate_order_cancellation,
)
from pagos.usecases.ports import PaymentStore
from saga_harness.events import fallo_asignacion, orden_cancelada
from sagakit.errors import TransientError
from sagakit.message import Message
from sagakit.ports import UnitOfWorkPort

from .fakes import FakeCalls, FakePayments, FakeUnit, PaymentTable

S = PaymentStatus
UseCase = Callable[[UnitOfWorkPort, PaymentStore, Callable[[], None], Message[Any]],
                   Awaitable[None]]
EventOf = Callable[[str, str], Message[Any]]
BOTH: list[tuple[UseCase, EventOf]] = [
    (compensate_order_cancellation, orden_cancelada),
    (compensate_allocation_failure, fallo_asignacion)]


def _ids() -> tuple[str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4())


async def _compensate(table: PaymentTable, use_case: UseCase, event: Message[Any]
                      ) -> tuple[FakeUnit, FakeCalls]:
    uow, calls = FakeUnit(table), FakeCalls()
    await use_case(uow, FakePayments(table, uow), calls.kick, event)
    return uow, calls


async def test_a_cancellation_before_any_charge_records_a_cancelled_payment() -> None:
    """So that a StockVerificado arriving later finds the saga's payment and never charges."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    uow, calls = await _compensate(table, compensate_order_cancellation,
                                   orden_cancelada(saga_id, order_id, customer="cust-8"))
    row = table.rows[saga_id]
    assert row.status is S.CANCELLED and row.order_id == order_id
    assert row.customer_id == "cust-8", "the customer reads its cancelled payment too"
    assert row.token is None and row.next_attempt_at is None and row.amount is None
    assert uow.commits == 1 and uow.emitted == [] and calls.kicks == 0


async def test_an_allocation_failure_with_no_payment_records_nothing() -> None:
    table = PaymentTable()
    saga_id, order_id = _ids()
    uow, calls = await _compensate(table, compensate_allocation_failure,
                                   fallo_asignacion(saga_id, order_id))
    assert table.rows == {}
    assert uow.commits == 1 and uow.committed and calls.kicks == 0


@pytest.mark.parametrize(("use_case", "event"), BOTH)
async def test_a_charge_no_call_was_sent_for_is_dropped(use_case: UseCase,
                                                        event: EventOf
                                                        ) -> None:
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CHARGING, order_id=order_id, token="tok_visa",
                    next_attempt_at=table.now)
    uow, calls = await _compensate(table, use_case, event(saga_id, order_id))
    assert row.status is S.CANCELLED and row.token is None
    assert uow.commits == 1 and calls.kicks == 0


@pytest.mark.parametrize(("use_case", "event"), BOTH)
@pytest.mark.parametrize("status", [S.CHARGING, S.CHARGE_FAILED])
async def test_a_charge_that_may_have_been_made_is_resolved(
        use_case: UseCase, event: EventOf, status: PaymentStatus) -> None:
    """A call may have gone through: its charge is replayed under its key to find out, so the
    token is kept for the replay and the work is due now."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, status, order_id=order_id, token="tok_visa", charge_sent=True,
                    next_attempt_at=None if status is S.CHARGE_FAILED else table.in_(8))
    uow, calls = await _compensate(table, use_case, event(saga_id, order_id))
    assert row.status is S.CANCEL_REQUESTED and row.token == "tok_visa"
    assert row.next_attempt_at == table.now
    assert uow.commits == 1 and calls.kicks == 1


@pytest.mark.parametrize(("use_case", "event"), BOTH)
async def test_a_captured_charge_is_refunded(use_case: UseCase,
                                             event: EventOf) -> None:
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1", charge_sent=True)
    uow, calls = await _compensate(table, use_case, event(saga_id, order_id))
    assert row.status is S.REFUNDING and row.next_attempt_at == table.now
    assert row.token is None
    assert uow.commits == 1 and uow.emitted == [] and calls.kicks == 1


@pytest.mark.parametrize(("use_case", "event"), BOTH)
@pytest.mark.parametrize("status", [S.DECLINED, S.CANCELLED, S.CANCEL_REQUESTED, S.REFUNDING,
                                    S.REFUNDED, S.REFUND_FAILED])
async def test_a_payment_with_nothing_to_undo_is_left_as_it_is(
        use_case: UseCase, event: EventOf, status: PaymentStatus) -> None:
    """A duplicate or late compensation, or a charge that never stood."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, status, order_id=order_id, token="tok_visa", charge_sent=True,
                    next_attempt_at=None)
    uow, calls = await _compensate(table, use_case, event(saga_id, order_id))
    assert row.status is status and row.token == "tok_visa" and row.next_attempt_at is None
    assert uow.commits == 1 and uow.committed and calls.kicks == 0


@pytest.mark.parametrize(("sent", "decided"), [(True, S.CANCEL_REQUESTED), (False, S.CANCELLED)])
async def test_a_cancellation_that_found_no_payment_decides_on_the_charge_created_meanwhile(
        sent: bool, decided: PaymentStatus) -> None:
    """StockVerificado (another topic, another lane) creates the charge between this handler's
    lock finding nothing and its insert: the saga's unique id refuses the insert, and the charge
    is locked and decided on — resolved if its call may have left, dropped if not."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    table.before_insert = lambda: table.add(saga_id, S.CHARGING, order_id=order_id,
                                            token="tok_visa", charge_sent=sent,
                                            next_attempt_at=table.now)
    uow, calls = await _compensate(table, compensate_order_cancellation,
                                   orden_cancelada(saga_id, order_id))
    row = table.rows[saga_id]
    assert row.status is decided
    assert row.amount is not None, "the charge's row, not one of the cancellation's"
    assert uow.commits == 1 and calls.kicks == int(sent)


async def test_a_charge_created_meanwhile_and_not_visible_yet_is_retried() -> None:
    """The insert was refused but the row it collided with cannot be seen yet: the message is
    handled again (TransientError), with nothing written."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    table.before_insert = lambda: table.add(saga_id, S.CHARGING, order_id=order_id,
                                            token="tok_visa", visible=False)
    uow, calls = FakeUnit(table), FakeCalls()
    with pytest.raises(TransientError):
        await compensate_order_cancellation(uow, FakePayments(table, uow), calls.kick,
                                            orden_cancelada(saga_id, order_id))
    assert table.rows[saga_id].status is S.CHARGING
    assert uow.commits == 0 and calls.kicks == 0


def _refused(reason: str) -> float:
    return REGISTRY.get_sample_value("saga_refund_refused_total",
                                     {"service": "pagos", "reason": reason}) or 0.0


@pytest.mark.parametrize(("use_case", "event"), BOTH)
@pytest.mark.parametrize("status", [S.CHARGING, S.CAPTURED])
async def test_a_compensation_for_another_order_changes_nothing(
        use_case: UseCase, event: EventOf, status: PaymentStatus) -> None:
    """The saga's payment is for its order: an event about another one is not the saga's
    (a bug or a forgery), whatever it asks."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, status, order_id=order_id, token="tok_visa", charge_sent=True,
                    charge_id="ch_1", next_attempt_at=None)
    before = _refused("order_mismatch")
    uow, calls = await _compensate(table, use_case, event(saga_id, str(uuid.uuid4())))
    assert row.status is status and row.token == "tok_visa" and row.next_attempt_at is None
    assert not row.allocation_failed
    assert uow.committed and uow.emitted == [] and calls.kicks == 0
    assert _refused("order_mismatch") == before + 1


async def test_an_allocation_failure_acted_on_is_recorded() -> None:
    """So that a StockAsignado after it is known to contradict it."""
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1", charge_sent=True)
    await _compensate(table, compensate_allocation_failure, fallo_asignacion(saga_id, order_id))
    assert row.allocation_failed and row.status is S.REFUNDING


async def test_a_cancellation_records_no_allocation_failure() -> None:
    table = PaymentTable()
    saga_id, order_id = _ids()
    row = table.add(saga_id, S.CAPTURED, order_id=order_id, charge_id="ch_1", charge_sent=True)
    await _compensate(table, compensate_order_cancellation, orden_cancelada(saga_id, order_id))
    assert not row.allocation_failed and row.status is S.REFUNDING


def test_every_refusal_is_exposed_at_zero_from_the_start() -> None:
    """An alert on increase() misses a series whose first sample is already 1."""
    metrics.REFUNDS_REFUSED.clear()  # as a fresh process has it
    metrics.initialise("pagos")
    for reason in ("stock_allocated", "order_mismatch"):
        assert REGISTRY.get_sample_value("saga_refund_refused_total",
                                         {"service": "pagos", "reason": reason}) == 0
    # And the series of the plumbing's metrics that carry pagos' own concepts.
    assert REGISTRY.get_sample_value("saga_compensations_total",
                                     {"service": "pagos", "reason": "refund"}) is not None
    assert REGISTRY.get_sample_value("saga_sealed_token_mismatch_total",
                                     {"service": "pagos"}) is not None
