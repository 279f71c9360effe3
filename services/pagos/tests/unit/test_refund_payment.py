"""refund_payment: a leased payment's refund call and its outcome: refunded and announced,
retried on its schedule, or given up on and left for a refund by hand."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from pagos import metrics as pagos_metrics
from pagos.config import PagosSettings
from pagos.domain.payment import Payment, PaymentStatus
from pagos.usecases.ports import RefundResult
from pagos.usecases.refund_payment import refund_key, refund_payment
from sagakit.observability import metrics

from .fakes import FailingCommits, FakeCalls, FakeGateway, FakeUnits, PaymentTable, Row

S = PaymentStatus
SETTINGS = PagosSettings(refund_retry_schedule_s=(2.0, 4.0))
FAILED = RefundResult(False, detail="HTTP 502: bad gateway")


def _leased(table: PaymentTable, **columns: Any) -> tuple[Row, Payment]:
    values: dict[str, Any] = {"charge_id": "ch_1", "charge_sent": True, "charge_attempts": 1,
                              "lease_until": table.in_(45), "next_attempt_at": table.now}
    values.update(columns)
    row = table.add(str(uuid.uuid4()), S.REFUNDING, **values)
    return row, row.payment(table.now)


async def _refund(table: PaymentTable, payment: Payment, gateway: FakeGateway
                  ) -> tuple[FakeUnits, FakeCalls]:
    units, calls = FakeUnits(table), FakeCalls()
    await refund_payment(units, gateway, SETTINGS, payment, calls.kick)
    return units, calls


def _emitted(units: FakeUnits) -> list[Any]:
    return [e for u in units.committed for e in u.emitted]


def _refunds() -> float:
    return metrics.COMPENSATIONS.labels("pagos", "refund")._value.get()


async def test_a_refund_made_is_recorded_and_announced() -> None:
    table = PaymentTable()
    row, payment = _leased(table)
    gateway = FakeGateway(refunds=[RefundResult(True, refund_id="re_1")])
    refunds = _refunds()
    units, calls = await _refund(table, payment, gateway)
    assert gateway.calls == [("refund", {"charge_id": "ch_1", "amount_minor": 1998,
                                         "idempotency_key": refund_key(row.saga_id)})]
    assert row.status is S.REFUNDED and row.refund_id == "re_1"
    assert row.amount_refunded == Decimal("19.98") and row.refund_attempts == 1
    assert row.lease_until is None and row.next_attempt_at is None
    [event] = _emitted(units)
    assert event.event_type == "ReembolsoEjecutado" and event.saga_id == row.saga_id
    assert event.payload == {"order_id": row.order_id, "payment_id": row.payment_id,
                             "refund_id": "re_1", "amount": "19.98", "currency": "USD"}
    assert _refunds() == refunds + 1, "counted once committed"
    assert calls.kicks == 0


async def test_a_failed_refund_is_retried_on_the_schedule() -> None:
    table = PaymentTable()
    row, payment = _leased(table)
    units, calls = await _refund(table, payment, FakeGateway(refunds=[FAILED]))
    assert row.status is S.REFUNDING and row.refund_attempts == 1
    assert row.next_attempt_at is not None
    assert table.in_(1.6) <= row.next_attempt_at <= table.in_(2.4)
    assert row.lease_until is None
    assert [(a["kind"], a["outcome"], a["detail"]) for a in row.attempt_log] == [
        ("refund", "failed", "HTTP 502: bad gateway")]
    assert _emitted(units) == [] and calls.kicks == 1


async def test_a_refund_that_keeps_failing_is_left_for_a_refund_by_hand() -> None:
    table = PaymentTable()
    row, payment = _leased(table, refund_attempts=2)
    alerts = metrics.ALERTS.labels("pagos", "refund_failed", "critical")._value.get()
    units, calls = await _refund(table, payment, FakeGateway(refunds=[FAILED]))
    assert row.status is S.REFUND_FAILED and row.manual_refund_required
    assert row.refund_attempts == 3 and row.next_attempt_at is None
    [event] = _emitted(units)
    assert event.event_type == "FalloReembolso"
    assert event.payload == {"order_id": row.order_id, "payment_id": row.payment_id,
                             "reason": "HTTP 502: bad gateway", "attempts": 3}
    assert metrics.ALERTS.labels("pagos", "refund_failed", "critical")._value.get() == alerts + 1
    assert calls.kicks == 0


async def test_a_refund_made_on_the_last_attempt_and_not_recorded_is_never_left_for_a_person(
        ) -> None:
    """The gateway refunded on the refund's last attempt and the refund could not be written,
    twice: recording it as a failed attempt would end it in REFUND_FAILED and send a person to
    refund money already refunded. The payment stays leased; when the lease runs out the
    refund is asked again under the same key and the gateway's "refunded" is recorded."""
    table = PaymentTable()
    row, payment = _leased(table, refund_attempts=2)
    alerts = metrics.ALERTS.labels("pagos", "refund_failed", "critical")._value.get()
    units = FailingCommits(table, 2, ConnectionResetError("connection reset by peer"), spared=0)
    await refund_payment(units, FakeGateway(), SETTINGS, payment, lambda: None)
    assert row.status is S.REFUNDING and row.refund_attempts == 2
    assert not row.manual_refund_required and row.lease_until == payment.lease_until
    assert metrics.ALERTS.labels("pagos", "refund_failed", "critical")._value.get() == alerts
    row.lease_until = table.in_(45)
    gateway = FakeGateway()
    await _refund(table, row.payment(table.now), gateway)
    assert gateway.calls[0][1]["idempotency_key"] == refund_key(row.saga_id)
    assert row.status is S.REFUNDED and not row.manual_refund_required


async def test_with_no_charge_id_the_gateway_is_not_asked_and_the_refund_fails() -> None:
    table = PaymentTable()
    row, payment = _leased(table, charge_id=None)
    gateway = FakeGateway()
    await _refund(table, payment, gateway)
    assert gateway.calls == []
    assert row.status is S.REFUNDING and row.refund_attempts == 1
    assert row.attempt_log[0]["detail"] == "no charge id to refund"


async def test_an_outcome_for_a_payment_refunded_meanwhile_changes_nothing_else() -> None:
    """Another worker's refund (its lease taken once this call's ran out) was recorded first:
    this call is logged, and neither status, schedule nor the other's lease moves."""
    table = PaymentTable()
    row, payment = _leased(table)
    gateway = FakeGateway(refunds=[RefundResult(True, refund_id="re_1")])
    others_lease = table.in_(90)

    def refunded_elsewhere() -> None:
        row.status, row.refund_attempts = S.REFUNDED, 1
        row.refund_id, row.lease_until, row.next_attempt_at = "re_1", others_lease, None
    gateway.during_call = refunded_elsewhere
    units, calls = await _refund(table, payment, gateway)
    assert row.status is S.REFUNDED and row.refund_attempts == 2
    assert row.lease_until == others_lease and row.next_attempt_at is None
    assert _emitted(units) == [], "ReembolsoEjecutado went out once, with the first record"
    assert calls.kicks == 0


def _worker_errors(stage: str) -> float:
    return pagos_metrics.GATEWAY_WORKER_ERRORS.labels("pagos", "refund", stage)._value.get()


async def test_a_refund_call_that_fails_in_pagos_is_a_failed_attempt_recorded_and_counted(
        ) -> None:
    """The client raised on the reply: the refund may have been made, so it is tried again
    under its key, on its schedule; past the last try, FalloReembolso and a refund by hand,
    as for a gateway that never answers (never a refund called again for ever with nothing
    recorded)."""
    table = PaymentTable()
    row, payment = _leased(table)
    errors = _worker_errors("call")
    _, calls = await _refund(table, payment, FakeGateway(refunds=[KeyError("id")]))
    assert row.status is S.REFUNDING and row.refund_attempts == 1
    assert row.lease_until is None and row.next_attempt_at is not None and calls.kicks == 1
    assert row.attempt_log[0]["detail"] == "KeyError: 'id'"
    assert _worker_errors("call") == errors + 1
    for _ in range(len(SETTINGS.refund_retry_schedule_s)):
        row.lease_until = table.in_(45)
        units, _ = await _refund(table, row.payment(table.now),
                                 FakeGateway(refunds=[ValueError("not JSON")]))
    assert row.status is S.REFUND_FAILED and row.manual_refund_required
    assert row.refund_attempts == 3
    [event] = _emitted(units)
    assert event.event_type == "FalloReembolso" and event.payload["attempts"] == 3
