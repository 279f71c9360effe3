"""charge_payment: a leased payment's charge call and its outcome, decided on the payment as it
was leased and written guarded by that; decided again on the payment read back when something
moved it during the call; and never sent once a cancellation got there first. The payment keeps
its token sealed; the gateway gets it opened, and a token that does not open fails the charge
without a call."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from pagos import metrics as pagos_metrics
from pagos.config import PagosSettings
from pagos.domain.payment import Outcome, Payment, PaymentStatus
from pagos.usecases import call_outcome, charge_request
from pagos.usecases.charge_payment import charge_key, charge_payment
from pagos.usecases.compensate_payment import compensate_order_cancellation
from pagos.usecases.ports import ChargeResult
from saga_contracts.sealing import Binding, new_key_pair, parse_opening_keys, parse_sealing_key
from saga_harness import sealing
from saga_harness.events import orden_cancelada, stock_verificado
from sagakit import jsonio
from sagakit.observability import metrics

from .fakes import FailingCommits, FakeCalls, FakeGateway, FakeUnits, PaymentTable, Row

S = PaymentStatus
SETTINGS = PagosSettings(charge_retry_schedule_s=(2.0, 8.0), resolve_attempts=3)
APPROVED = ChargeResult(Outcome.APPROVED, charge_id="ch_1")
DECLINED = ChargeResult(Outcome.DECLINED, decline_code="card_declined", detail="do not honor")
UNAVAILABLE = ChargeResult(Outcome.UNAVAILABLE, detail="gateway timeout")
ORDER_ID = "00000000-0000-0000-0000-0000000000bb"  # the fake rows' order
CUSTOMER = "cust-7"
Sealer = Callable[[str, Binding], str]


def _leased(table: PaymentTable, status: PaymentStatus = S.CHARGING, *,
            seal: Sealer = sealing.sealed, **columns: Any) -> tuple[Row, Payment]:
    """A payment leased to the call about to be made, as ``claim_due`` hands it over; unless
    ``columns`` give its token, "tok_visa" sealed by ``seal`` for the payment's charge."""
    saga_id = str(uuid.uuid4())
    event = stock_verificado(saga_id, ORDER_ID, customer=CUSTOMER)
    values: dict[str, Any] = {
        "customer_id": CUSTOMER, "lease_until": table.in_(45), "next_attempt_at": table.now,
        "trigger": {"span_id": "span-1", "traceparent": None,
                    "event": charge_request.kept(event.envelope)}}
    values.update(columns)
    if "token" not in values:
        values["token"] = seal("tok_visa", Binding.of(
            saga_id=saga_id, order_id=values.get("order_id", ORDER_ID),
            customer_id=values["customer_id"], amount=values.get("amount", Decimal("19.98")),
            currency=values.get("currency", "USD")))
    row = table.add(saga_id, status, **values)
    return row, row.payment(table.now)


async def _charge(table: PaymentTable, payment: Payment, gateway: FakeGateway,
                  tokens: Any = None) -> tuple[FakeUnits, FakeCalls]:
    units, calls = FakeUnits(table), FakeCalls()
    await charge_payment(units, gateway, SETTINGS, payment, calls.kick,
                         tokens=tokens or sealing.opening_keys())
    return units, calls


def _alerts(alert: str) -> float:
    return metrics.ALERTS.labels("pagos", alert, "critical")._value.get()


def _emitted(units: FakeUnits) -> list[Any]:
    return [e for u in units.committed for e in u.emitted]


async def test_an_approved_charge_is_captured_and_announced() -> None:
    table = PaymentTable()
    row, payment = _leased(table)
    gateway = FakeGateway([APPROVED])
    units, calls = await _charge(table, payment, gateway)
    assert gateway.calls == [("charge", {
        "amount_minor": 1998, "currency": "usd", "token": "tok_visa",
        "idempotency_key": charge_key(row.saga_id), "saga_id": row.saga_id})], \
        "the gateway gets the token opened"
    assert row.status is S.CAPTURED and row.charge_id == "ch_1" and row.charge_attempts == 1
    assert row.token is None, "no call needs the token any more"
    assert row.charge_sent, "marked as maybe charged before the call left"
    assert row.lease_until is None and row.next_attempt_at is None
    assert [(a["kind"], a["attempt"], a["outcome"]) for a in row.attempt_log] == [
        ("charge", 1, "approved")]
    [event] = _emitted(units)
    assert event.event_type == "PagoExitoso" and event.saga_id == row.saga_id
    assert event.payload == {"order_id": row.order_id, "payment_id": row.payment_id,
                             "charge_id": "ch_1", "amount": "19.98", "currency": "USD"}
    assert event.parent_span_id == "span-1", "the trace goes on from StockVerificado"
    assert calls.kicks == 0


async def test_a_declined_charge_is_refused_and_announced() -> None:
    table = PaymentTable()
    row, payment = _leased(table)
    units, _ = await _charge(table, payment, FakeGateway([DECLINED]))
    assert row.status is S.DECLINED and row.decline_code == "card_declined"
    assert row.token is None and row.lease_until is None
    [event] = _emitted(units)
    assert event.event_type == "PagoRechazado"
    assert event.payload == {"order_id": row.order_id, "payment_id": row.payment_id,
                             "decline_code": "card_declined", "reason": "do not honor"}


async def test_an_unknown_outcome_is_retried_on_the_schedule_with_jitter() -> None:
    table = PaymentTable()
    row, payment = _leased(table)
    units, calls = await _charge(table, payment, FakeGateway([UNAVAILABLE]))
    assert row.status is S.CHARGING and row.charge_attempts == 1
    assert row.token == payment.token, "kept: the charge is made again under its key"
    assert row.next_attempt_at is not None
    assert table.in_(1.6) <= row.next_attempt_at <= table.in_(2.4), "2 s ± 20 %"
    assert row.lease_until is None, "the call's lease ends with its outcome"
    assert _emitted(units) == [] and calls.kicks == 1


@pytest.mark.parametrize(("result", "attempts_before"), [(UNAVAILABLE, 2),
                                                         (ChargeResult(Outcome.REJECTED,
                                                                       detail="HTTP 400"), 0)])
async def test_a_charge_given_up_on_is_dead_lettered_with_an_alert(
        result: ChargeResult, attempts_before: int) -> None:
    """Past its last retry, or refused in a way retrying will not change: the request is
    parked for an operator, the token kept (the outcome may still have to be replayed)."""
    table = PaymentTable()
    row, payment = _leased(table, charge_attempts=attempts_before)
    alerts = _alerts("charge_failed")
    units, calls = await _charge(table, payment, FakeGateway([result]))
    assert row.status is S.CHARGE_FAILED and row.charge_attempts == attempts_before + 1
    assert row.token == payment.token and row.next_attempt_at is None
    assert _emitted(units) == []
    [letter] = table.dead_letters
    assert letter.topic == "pagos-dlq" and letter.key == row.saga_id
    assert letter.value["reason"] == "gateway_retries_exhausted"
    assert letter.value["attempts"][-1]["attempt"] == attempts_before + 1
    assert _alerts("charge_failed") == alerts + 1
    assert calls.kicks == 0


async def test_a_cancelled_charge_found_made_by_its_replay_is_refunded() -> None:
    table = PaymentTable()
    row, payment = _leased(table, S.CANCEL_REQUESTED, charge_sent=True, charge_attempts=1)
    units, calls = await _charge(table, payment, FakeGateway([APPROVED]))
    assert row.status is S.REFUNDING and row.charge_id == "ch_1"
    assert row.next_attempt_at == table.now, "the refund is due now"
    assert row.token is None
    assert _emitted(units) == [], "no PagoExitoso for an order being cancelled"
    assert calls.kicks == 1


async def test_a_cancelled_charge_its_replay_declines_was_never_made_and_is_told() -> None:
    table = PaymentTable()
    row, payment = _leased(table, S.CANCEL_REQUESTED, charge_sent=True, charge_attempts=1)
    units, calls = await _charge(table, payment, FakeGateway([DECLINED]))
    assert row.status is S.CANCELLED and row.token is None and row.next_attempt_at is None
    # The card was declined all the same: pedidos counts it against the decline limits.
    [declined] = _emitted(units)
    assert declined.event_type == "PagoRechazado" and calls.kicks == 0
    assert declined.payload["decline_code"] == "card_declined"


async def test_a_cancelled_charge_that_stays_unknown_is_left_for_a_manual_refund() -> None:
    """Replayed PAGOS_RESOLVE_ATTEMPTS times (3 here), every answer unknown: then FalloReembolso
    and a refund by hand."""
    table = PaymentTable()
    row, payment = _leased(table, S.CANCEL_REQUESTED, charge_sent=True, charge_attempts=1)
    alerts = _alerts("cancelled_charge_unresolved")
    for replays in (1, 2):
        await _charge(table, payment, FakeGateway([UNAVAILABLE]))
        assert row.status is S.CANCEL_REQUESTED and row.resolve_attempts == replays
        assert row.next_attempt_at is not None and row.token == payment.token
        row.lease_until = table.in_(45)  # leased again for its next try
        payment = row.payment(table.now)
    units, calls = await _charge(table, payment, FakeGateway([UNAVAILABLE]))
    assert row.status is S.REFUND_FAILED and row.manual_refund_required
    assert row.token is None and row.resolve_attempts == 3
    assert row.charge_attempts == 1, "the replays are not the charge's calls"
    assert [(a["kind"], a["attempt"]) for a in row.attempt_log] == [
        ("resolve", 1), ("resolve", 2), ("resolve", 3)]
    [event] = _emitted(units)
    assert event.event_type == "FalloReembolso"
    assert event.payload == {"order_id": row.order_id, "payment_id": row.payment_id,
                             "reason": "gateway timeout", "attempts": 3}
    assert _alerts("cancelled_charge_unresolved") == alerts + 1
    assert calls.kicks == 0


async def _outage_then_cancelled(table: PaymentTable, charges: int) -> tuple[Row, Payment]:
    """A charge whose ``charges`` calls the gateway left unanswered (an outage), then cancelled
    by pedidos (its step deadline) before its next retry: leased for the first replay."""
    row, payment = _leased(table)
    for _ in range(charges):
        await _charge(table, payment, FakeGateway([UNAVAILABLE]))
        row.lease_until = table.in_(45)
        payment = row.payment(table.now)
    assert row.status is S.CHARGING and row.charge_attempts == charges
    units = FakeUnits(table)
    async with units() as (uow, payments):
        await compensate_order_cancellation(uow, payments, lambda: None,
                                            orden_cancelada(row.saga_id, ORDER_ID))
    assert row.status is S.CANCEL_REQUESTED
    row.lease_until = table.in_(45)
    return row, row.payment(table.now)


async def test_the_calls_of_a_charge_before_its_cancellation_leave_its_resolution_every_replay(
        ) -> None:
    """A gateway down through the charge's retries (two of three here), then the cancellation:
    the replays that resolve it have their own budget. The first replay, still unanswered, is
    one of three, and the gateway, back for the second, says no charge was made: the order is
    cancelled, and nobody is asked to refund by hand what was never charged."""
    table = PaymentTable()
    row, payment = await _outage_then_cancelled(table, charges=2)
    alerts = _alerts("cancelled_charge_unresolved")
    await _charge(table, payment, FakeGateway([UNAVAILABLE]))
    assert row.status is S.CANCEL_REQUESTED, "one replay of three: resolved again"
    assert (row.charge_attempts, row.resolve_attempts) == (2, 1)
    assert row.next_attempt_at is not None and row.token == payment.token
    row.lease_until = table.in_(45)
    units, _ = await _charge(table, row.payment(table.now), FakeGateway([DECLINED]))
    assert row.status is S.CANCELLED and not row.manual_refund_required
    assert [e.event_type for e in _emitted(units)] == ["PagoRechazado"]
    assert _alerts("cancelled_charge_unresolved") == alerts
    assert [(a["kind"], a["attempt"], a["outcome"]) for a in row.attempt_log] == [
        ("charge", 1, "unavailable"), ("charge", 2, "unavailable"),
        ("resolve", 1, "unavailable"), ("resolve", 2, "declined")]


async def test_a_charge_that_used_every_retry_still_gets_every_replay() -> None:
    """Every retry of the charge used (three calls, two retries here) is not a replay used."""
    table = PaymentTable()
    row, _ = await _outage_then_cancelled(table, charges=2)
    # The third call, past the last retry, would fail the charge: it is cancelled before.
    for replays in range(1, SETTINGS.resolve_attempts + 1):
        row.lease_until = table.in_(45)
        await _charge(table, row.payment(table.now), FakeGateway([UNAVAILABLE]))
        assert row.resolve_attempts == replays
        assert row.status is (S.CANCEL_REQUESTED if replays < SETTINGS.resolve_attempts
                              else S.REFUND_FAILED)


async def test_a_replay_answered_with_a_reply_that_is_not_the_apis_is_a_resolve_recorded(
        ) -> None:
    """A charge failed after its every call went unanswered (CHARGE_FAILED), then cancelled: the
    replay that asks the gateway whether it was made gets a reply that is not the API's (the
    client makes it an unknown outcome). It is in the attempt log as a resolve whose outcome
    was not understood, one replay of the resolution's budget, and the replay is scheduled."""
    table = PaymentTable()
    row, payment = _leased(table)
    for _ in range(len(SETTINGS.charge_retry_schedule_s) + 1):
        await _charge(table, payment, FakeGateway([UNAVAILABLE]))
        row.lease_until = table.in_(45)
        payment = row.payment(table.now)
    assert row.status is S.CHARGE_FAILED and row.token is not None
    units = FakeUnits(table)
    async with units() as (uow, payments):
        await compensate_order_cancellation(uow, payments, lambda: None,
                                            orden_cancelada(row.saga_id, ORDER_ID))
    assert row.status is S.CANCEL_REQUESTED
    row.lease_until = table.in_(45)
    garbled = ChargeResult(Outcome.UNAVAILABLE, detail="HTTP 200 without the charge's id: a "
                           "reply that is not the API's")
    gateway = FakeGateway([garbled])
    await _charge(table, row.payment(table.now), gateway)
    assert [c["idempotency_key"] for _, c in gateway.calls] == [charge_key(row.saga_id)]
    assert [(a["kind"], a["attempt"], a["outcome"]) for a in row.attempt_log] == [
        ("charge", 1, "unavailable"), ("charge", 2, "unavailable"),
        ("charge", 3, "unavailable"), ("resolve", 1, "unavailable")]
    assert row.attempt_log[-1]["detail"] == garbled.detail
    assert (row.status, row.charge_attempts, row.resolve_attempts) == (S.CANCEL_REQUESTED, 3, 1)
    assert row.next_attempt_at is not None and row.lease_until is None


async def test_a_charge_call_answered_after_the_cancellation_is_no_replay() -> None:
    """The call left while the payment was CHARGING and the cancellation landed while it was
    in flight: its unknown answer is the charge's, and the resolution keeps every replay."""
    table = PaymentTable()
    row, payment = _leased(table)
    gateway = FakeGateway([UNAVAILABLE])
    gateway.during_call = lambda: setattr(row, "status", S.CANCEL_REQUESTED)
    await _charge(table, payment, gateway)
    assert row.status is S.CANCEL_REQUESTED
    assert (row.charge_attempts, row.resolve_attempts) == (1, 0)
    assert row.next_attempt_at is not None
    assert table.in_(1.6) <= row.next_attempt_at <= table.in_(2.4), \
        "the first replay waits as a charge's first retry"
    for replays in range(1, SETTINGS.resolve_attempts + 1):
        row.lease_until = table.in_(45)
        await _charge(table, row.payment(table.now), FakeGateway([UNAVAILABLE]))
        assert (row.charge_attempts, row.resolve_attempts) == (1, replays)
        assert row.status is (S.CANCEL_REQUESTED if replays < SETTINGS.resolve_attempts
                              else S.REFUND_FAILED)


@pytest.mark.parametrize(("status", "decided"), [(S.CANCEL_REQUESTED, S.REFUND_FAILED),
                                                 (S.CHARGING, S.CHARGE_FAILED)])
async def test_with_no_token_the_gateway_is_not_asked(status: PaymentStatus,
                                                      decided: PaymentStatus) -> None:
    table = PaymentTable()
    row, payment = _leased(table, status, token=None, charge_sent=True)
    gateway = FakeGateway()
    await _charge(table, payment, gateway)
    assert gateway.calls == []
    assert row.status is decided
    assert [(a["outcome"], a["detail"]) for a in row.attempt_log] == [
        ("not_asked", "no payment token")]


@pytest.mark.parametrize("moved", ["cancelled", "leased_again"])
async def test_a_call_whose_payment_was_cancelled_or_leased_again_is_not_sent(
        moved: str) -> None:
    """The re-check right before the call: a cancellation committed after the lease (the charge
    is dropped with no call), or a lease run out and taken by another worker."""
    table = PaymentTable()
    row, payment = _leased(table)
    if moved == "cancelled":
        row.status = S.CANCELLED
    else:
        row.lease_until = table.in_(60)
    gateway = FakeGateway()
    units, calls = await _charge(table, payment, gateway)
    assert gateway.calls == [] and not row.charge_sent
    assert row.attempt_log == [] and len(units.opened) == 1 and units.committed == []
    assert calls.kicks == 0


async def test_a_retry_cancelled_after_its_lease_is_decided_as_the_call_found_it() -> None:
    """Leased while CHARGING, cancelled before its call left (a call had gone before: the
    cancellation asks for a resolution): the call is the resolution, decided on the payment
    as the re-check right before it found it, with no write refused first."""
    table = PaymentTable()
    row, payment = _leased(table, charge_sent=True, charge_attempts=1)
    row.status = S.CANCEL_REQUESTED
    units, _ = await _charge(table, payment, FakeGateway([APPROVED]))
    assert row.status is S.REFUNDING
    assert len(units.opened) == 2 and all(u.committed for u in units.opened[1:])


async def test_an_outcome_whose_payment_moved_during_the_call_is_decided_again() -> None:
    """A cancellation committed while the call was in flight: the approval decided on CHARGING
    writes nothing; decided again on CANCEL_REQUESTED it means a refund."""
    table = PaymentTable()
    row, payment = _leased(table)
    gateway = FakeGateway([APPROVED])
    gateway.during_call = lambda: setattr(row, "status", S.CANCEL_REQUESTED)
    units, calls = await _charge(table, payment, gateway)
    assert row.status is S.REFUNDING and row.next_attempt_at == table.now
    assert [a["kind"] for a in row.attempt_log] == ["charge"], "recorded once"
    assert _emitted(units) == []
    assert [u.reads_outside_transaction for u in units.opened] == [True, True, True]
    assert [u.committed for u in units.opened[1:]] == [False, True]
    assert calls.kicks == 1


async def test_a_late_outcome_that_changes_nothing_leaves_the_work_and_lease_of_others(
        ) -> None:
    """The call hung past its lease; another worker resolved the cancelled charge and holds
    the refund's lease. The late approval is logged and changes nothing else."""
    table = PaymentTable()
    row, payment = _leased(table)
    gateway = FakeGateway([APPROVED])
    others_lease, refund_due = table.in_(90), table.in_(-1)

    def resolved_elsewhere() -> None:
        row.status, row.charge_attempts = S.REFUNDING, 1
        row.lease_until, row.next_attempt_at = others_lease, refund_due
    gateway.during_call = resolved_elsewhere
    units, calls = await _charge(table, payment, gateway)
    assert row.status is S.REFUNDING and row.charge_attempts == 2
    assert row.lease_until == others_lease and row.next_attempt_at == refund_due
    assert _emitted(units) == [] and calls.kicks == 0


async def test_a_late_approval_of_a_charge_given_up_on_captures_it() -> None:
    table = PaymentTable()
    row, payment = _leased(table)
    gateway = FakeGateway([APPROVED])
    gateway.during_call = lambda: (setattr(row, "status", S.CHARGE_FAILED),
                                   setattr(row, "charge_attempts", 3))
    units, _ = await _charge(table, payment, gateway)
    assert row.status is S.CAPTURED and row.charge_attempts == 4
    assert [e.event_type for e in _emitted(units)] == ["PagoExitoso"]


async def test_an_outcome_whose_payment_keeps_changing_is_left_to_the_lease() -> None:
    """Moved under every try: nothing is written, and the lease is left to run out (the call is
    made again then, under the same key)."""
    table = PaymentTable()
    row, payment = _leased(table)

    def another_change() -> None:
        row.refund_attempts += 1
    table.before_commit = another_change
    units, calls = await _charge(table, payment, FakeGateway([APPROVED]))
    assert row.status is S.CHARGING and row.attempt_log == []
    assert row.lease_until == payment.lease_until
    assert len(units.opened) == 1 + call_outcome.RECORD_TRIES and units.committed == []
    assert _emitted(units) == [] and calls.kicks == 0


def test_the_retry_jitter_stays_within_a_fifth() -> None:
    waits = [call_outcome.jittered(10.0) for _ in range(200)]
    assert all(8.0 <= w <= 12.0 for w in waits) and len(set(waits)) > 1


def _changed(token: str, charge: Binding) -> str:
    prefix, body = sealing.sealed(token, charge).rsplit(":", 1)
    changed = "A" if body[-10] != "A" else "B"
    return f"{prefix}:{body[:-10]}{changed}{body[-9:]}"


# Tokens that do not open for the payment's charge: the key id is not held, or the token was
# sealed for another charge (copied from another saga's event), or changed on the way.
UNOPENABLE: dict[str, Sealer] = {
    "unknown_key_id": lambda token, charge: parse_sealing_key(
        new_key_pair("retired")[1]).seal(token, charge),
    "another_sagas": lambda token, charge: sealing.sealed(
        token, dataclasses.replace(charge, saga_id=str(uuid.uuid4()))),
    "another_orders": lambda token, charge: sealing.sealed(
        token, dataclasses.replace(charge, order_id=str(uuid.uuid4()))),
    "another_amount": lambda token, charge: sealing.sealed(
        token, dataclasses.replace(charge, amount_minor=charge.amount_minor - 1)),
    "another_currency": lambda token, charge: sealing.sealed(
        token, dataclasses.replace(charge, currency="EUR")),
    "another_customers": lambda token, charge: sealing.sealed(
        token, dataclasses.replace(charge, customer_id="cust-other")),
    "changed": _changed,
}


def _mismatches() -> float:
    return pagos_metrics.SEALED_TOKEN_MISMATCHES.labels("pagos")._value.get()


@pytest.mark.parametrize("kind", sorted(UNOPENABLE))
async def test_a_token_that_does_not_open_fails_the_charge_without_a_call(kind: str) -> None:
    """Final for that payment, never a crash: no call, not marked as maybe charged, the charge
    failed into a dead letter with an alert; the sealed token is kept, for a replay once pagos
    holds the key. Nothing written names the token."""
    table = PaymentTable()
    row, payment = _leased(table, seal=UNOPENABLE[kind])
    token = row.token
    alerts, mismatches = _alerts("charge_failed"), _mismatches()
    gateway = FakeGateway([APPROVED])
    await _charge(table, payment, gateway)
    assert gateway.calls == [] and not row.charge_sent
    assert row.status is S.CHARGE_FAILED and row.token == token and row.lease_until is None
    [attempt] = row.attempt_log
    assert attempt["outcome"] == "not_asked"
    [letter] = table.dead_letters
    assert letter.value["reason"] == "gateway_retries_exhausted"
    assert "tok_visa" not in jsonio.dumps([row.attempt_log, letter.value["attempts"],
                                           letter.value["last_traceback"]])
    assert _alerts("charge_failed") == alerts + 1
    if kind == "unknown_key_id":
        # Not a forgery: a key pagos does not hold yet. Its customer keeps the payment.
        assert attempt["detail"].startswith("payment token does not open")
        assert "'retired'" in attempt["detail"]
        assert row.customer_id == CUSTOMER and _mismatches() == mismatches
    else:
        assert attempt["detail"].startswith("payment token is not for this charge")
        assert row.customer_id is None, "the customer the event named is not the token's"
        assert _mismatches() == mismatches + 1


async def test_a_charge_failed_on_its_token_is_cancelled_without_a_refund() -> None:
    """No call was ever sent: a cancellation has nothing to resolve or refund."""
    from pagos.domain.payment import on_order_cancelled

    table = PaymentTable()
    row, payment = _leased(table, seal=UNOPENABLE["unknown_key_id"])
    await _charge(table, payment, FakeGateway())
    assert on_order_cancelled(row.status, row.charge_sent).status is S.CANCELLED


async def test_tokens_sealed_with_either_key_open_while_keys_rotate() -> None:
    old_private, old_public = new_key_pair("2026-01")
    new_private, new_public = new_key_pair("2026-07")
    both = parse_opening_keys(f"{old_private}\n{new_private}")
    for public in (old_public, new_public):
        table = PaymentTable()
        row, payment = _leased(table, seal=parse_sealing_key(public).seal)
        gateway = FakeGateway([APPROVED])
        await _charge(table, payment, gateway, tokens=both)
        assert gateway.calls[0][1]["token"] == "tok_visa"
        assert row.status is S.CAPTURED and row.token is None


@pytest.mark.parametrize(("amount", "currency", "minor"), [
    ("1000.00", "CLP", 1000), ("10.00", "USD", 1000), ("12.50", "EUR", 1250)])
async def test_the_gateway_gets_the_amount_in_its_currencys_minor_units(
        amount: str, currency: str, minor: int) -> None:
    """ISO 4217's exponent, not two decimals for every currency: 1000 CLP is 1000, where it
    once went out as 100000."""
    table = PaymentTable()
    _, payment = _leased(table, amount=Decimal(amount), currency=currency)
    gateway = FakeGateway([APPROVED])
    await _charge(table, payment, gateway)
    [(kind, call)] = gateway.calls
    assert (kind, call["amount_minor"], call["currency"]) == ("charge", minor, currency.lower())


async def test_an_amount_its_currency_cannot_hold_is_never_sent() -> None:
    table = PaymentTable()
    # No such charge can be sealed for either: the token is whatever the event carried.
    row, payment = _leased(table, amount=Decimal("1000.50"), currency="CLP",
                           token=sealing.sealed("tok_visa", sealing.charge(
                               saga_id=str(uuid.uuid4()), order_id=ORDER_ID)))
    gateway = FakeGateway()
    await _charge(table, payment, gateway)
    assert gateway.calls == []
    assert row.status is S.CHARGE_FAILED
    [attempt] = row.attempt_log
    assert attempt["outcome"] == "not_asked" and "CLP has 0 decimal places" in attempt["detail"]


# A card token in the gateway's own shape, which no pattern of pagos knows: only the token the
# call had, replaced wherever it appears, keeps it out of what pagos writes.
CARD = "pm_1PxCardOfTheVictim42"


def _worker_errors(call: str, stage: str) -> float:
    return pagos_metrics.GATEWAY_WORKER_ERRORS.labels("pagos", call, stage)._value.get()


def _carries(records: list[logging.LogRecord], text: str) -> bool:
    return any(text in str(value) for r in records
               for value in (r.getMessage(), *vars(r).values()))


@pytest.mark.parametrize("status", [S.CHARGING, S.CANCEL_REQUESTED])
async def test_a_call_that_fails_in_pagos_is_its_unknown_outcome_recorded_and_counted(
        status: PaymentStatus, caplog: pytest.LogCaptureFixture) -> None:
    """The client raised on the reply (after the call left, so the charge may have been
    made): recorded as an unknown outcome, counted against the call's budget and retried on
    its schedule, like a gateway that did not answer. Logged and kept without the card
    token, whatever its shape."""
    table = PaymentTable()
    row, payment = _leased(table, status, charge_sent=True,
                           seal=lambda _, charge: sealing.sealed(CARD, charge))
    failed = ValueError(f"Expecting value: line 1 column 1 (char 0) in reply to {CARD}")
    errors = _worker_errors("charge", "call")
    _, calls = await _charge(table, payment, FakeGateway([failed]))
    assert row.status is status, "unknown: retried"
    assert (row.charge_attempts, row.resolve_attempts) == (
        (1, 0) if status is S.CHARGING else (0, 1))
    assert row.lease_until is None and row.next_attempt_at is not None and calls.kicks == 1
    [attempt] = row.attempt_log
    assert attempt["outcome"] == "unavailable"
    assert attempt["detail"] == ("ValueError: Expecting value: line 1 column 1 (char 0) in "
                                 "reply to [MASKED]")
    assert _worker_errors("charge", "call") == errors + 1
    assert _carries(caplog.records, "Expecting value") and not _carries(caplog.records, CARD)


async def test_a_call_pagos_keeps_failing_ends_as_a_gateway_that_never_answers_does() -> None:
    """Every attempt counted: past the last retry the charge fails into its dead letter with
    its alert, as for a gateway that never answers (never a call made again for ever)."""
    table = PaymentTable()
    row, payment = _leased(table)
    alerts = _alerts("charge_failed")
    for _ in range(len(SETTINGS.charge_retry_schedule_s) + 1):
        await _charge(table, payment, FakeGateway([KeyError("id")]))
        row.lease_until = table.in_(45)
        payment = row.payment(table.now)
    assert row.status is S.CHARGE_FAILED and row.charge_attempts == 3
    [letter] = table.dead_letters
    assert letter.value["reason"] == "gateway_retries_exhausted"
    assert _alerts("charge_failed") == alerts + 1


async def test_a_failure_before_the_call_is_counted_too() -> None:
    """Opening the token failed in a way nothing expected: no call left, and the attempt is
    recorded as unknown all the same (the opener may work on the retry)."""
    class Broken:
        def open(self, sealed: str, charge: Binding) -> str:
            raise RuntimeError("key store unavailable")

    table = PaymentTable()
    row, payment = _leased(table)
    gateway = FakeGateway()
    await _charge(table, payment, gateway, tokens=Broken())
    assert gateway.calls == [] and row.status is S.CHARGING and row.charge_attempts == 1
    assert row.attempt_log[0]["detail"] == "RuntimeError: key store unavailable"


async def test_an_approval_whose_recording_fails_once_is_recorded_on_the_second_try() -> None:
    """The commit of the approval lost its connection before it reached the database: it is
    written again on a new unit of work, and the charge is captured on this call."""
    table = PaymentTable()
    row, payment = _leased(table)
    errors = _worker_errors("charge", "record")
    units = FailingCommits(table, 1, ConnectionResetError("connection reset by peer"))
    await charge_payment(units, FakeGateway([APPROVED]), SETTINGS, payment, lambda: None,
                         tokens=sealing.opening_keys())
    assert row.status is S.CAPTURED and row.charge_attempts == 1
    assert [a["outcome"] for a in row.attempt_log] == ["approved"]
    assert _worker_errors("charge", "record") == errors + 1


@pytest.mark.parametrize("answer", [APPROVED, DECLINED], ids=["approved", "declined"])
async def test_a_sure_answer_that_cannot_be_recorded_on_the_last_attempt_is_learnt_again(
        answer: ChargeResult) -> None:
    """The gateway answered for sure on the charge's last attempt and the answer could not be
    written, twice: it is not turned into an unknown outcome, which on the last attempt would
    end an approved charge in CHARGE_FAILED (the customer charged, the order lost) or a
    declined one in a manual refund of nothing. The payment stays leased; when the lease runs
    out the call is made again under the same key, and the gateway's answer is recorded."""
    table = PaymentTable()
    last = len(SETTINGS.charge_retry_schedule_s)
    row, payment = _leased(table, charge_attempts=last)
    errors = _worker_errors("charge", "record")
    units = FailingCommits(table, 2, ConnectionResetError("connection reset by peer"))
    gateway = FakeGateway([answer])
    await charge_payment(units, gateway, SETTINGS, payment, lambda: None,
                         tokens=sealing.opening_keys())
    assert row.status is S.CHARGING and row.charge_attempts == last
    assert row.attempt_log == [] and not row.manual_refund_required
    assert row.lease_until == payment.lease_until, "left leased, for the same call to learn"
    assert _worker_errors("charge", "record") == errors + 2
    row.lease_until = table.in_(45)
    await _charge(table, row.payment(table.now), FakeGateway([answer]))
    assert gateway.calls[0][1]["idempotency_key"] == charge_key(row.saga_id)
    assert row.status is (S.CAPTURED if answer is APPROVED else S.DECLINED)
    assert not row.manual_refund_required


async def test_an_unknown_outcome_that_cannot_be_recorded_is_recorded_as_unknown() -> None:
    """The gateway did not answer, and recording that failed twice: "unknown" is written in
    its place while the call holds its lease, counted against the attempts, retried on the
    schedule, never a call made again for ever with nothing recorded."""
    table = PaymentTable()
    row, payment = _leased(table)
    errors = _worker_errors("charge", "record")
    units = FailingCommits(table, 2, ConnectionResetError("connection reset by peer"))
    await charge_payment(units, FakeGateway([UNAVAILABLE]), SETTINGS, payment, lambda: None,
                         tokens=sealing.opening_keys())
    assert row.status is S.CHARGING and row.charge_attempts == 1
    assert row.lease_until is None and row.next_attempt_at is not None
    [attempt] = row.attempt_log
    assert attempt["outcome"] == "unavailable"
    assert attempt["detail"] == ("outcome not recorded: ConnectionResetError: connection "
                                 "reset by peer")
    assert _worker_errors("charge", "record") == errors + 2
    row.lease_until = table.in_(45)
    await _charge(table, row.payment(table.now), FakeGateway([APPROVED]))
    assert row.status is S.CAPTURED and row.charge_attempts == 2


async def test_an_outcome_whose_failed_commit_went_through_is_not_recorded_twice() -> None:
    """The commit wrote the approval and then lost its connection: it ended the call's lease,
    so the unknown outcome that stands in for it writes nothing."""
    table = PaymentTable()
    row, payment = _leased(table)
    units = FailingCommits(table, 1, ConnectionResetError("lost"), written=True)
    await charge_payment(units, FakeGateway([APPROVED]), SETTINGS, payment, lambda: None,
                         tokens=sealing.opening_keys())
    assert row.status is S.CAPTURED and row.charge_attempts == 1
    assert [a["outcome"] for a in row.attempt_log] == ["approved"]
