"""The payment state machine: a charge and its cancellation racing in every order (Hypothesis).

The gateway here is a model: a charge call may go through, be declined, or fail in a way that
leaves its outcome unknown (and may still have gone through). Whatever the interleaving, once
pagos has no work left, a payment whose order was cancelled or whose allocation failed has no
net charge, unless it is flagged for a manual refund.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pagos.domain import payment as d

P = d.PaymentStatus
CHARGE_SCHEDULE = (2.0, 8.0, 18.0)
REFUND_SCHEDULE = (2.0, 4.0, 8.0, 16.0)
RESOLVE = 5  # PAGOS_RESOLVE_ATTEMPTS


def test_charge_retries_follow_the_schedule_then_give_up_with_an_alert() -> None:
    waits = [d.after_charge(P.CHARGING, d.Outcome.UNAVAILABLE, n, 0, CHARGE_SCHEDULE,
                            RESOLVE).retry_in_s
             for n in (1, 2, 3)]
    assert waits == [2.0, 8.0, 18.0]
    last = d.after_charge(P.CHARGING, d.Outcome.UNAVAILABLE, 4, 0, CHARGE_SCHEDULE, RESOLVE)
    assert last.status is P.CHARGE_FAILED and last.dead_letter and last.alert


def test_refund_gives_up_after_five_attempts() -> None:
    assert d.after_refund(P.REFUNDING, False, 4, REFUND_SCHEDULE).retry_in_s == 16.0
    final = d.after_refund(P.REFUNDING, False, 5, REFUND_SCHEDULE)
    assert final.status is P.REFUND_FAILED and final.emit is d.Emit.FALLO_REEMBOLSO


@pytest.mark.parametrize(("status", "charge_sent", "to"), [
    (None, False, P.CANCELLED),
    (P.CHARGING, False, P.CANCELLED),
    (P.CHARGING, True, P.CANCEL_REQUESTED),
    (P.CAPTURED, False, P.REFUNDING),
    (P.CHARGE_FAILED, True, P.CANCEL_REQUESTED),
    (P.CHARGE_FAILED, False, P.CANCELLED),  # failed without a call: its token did not open
])
def test_cancellation(status: P | None, charge_sent: bool, to: P) -> None:
    assert d.on_order_cancelled(status, charge_sent).status is to


def test_an_unresolvable_cancelled_charge_is_left_for_a_manual_refund() -> None:
    no_token = d.after_charge(P.CANCEL_REQUESTED, d.Outcome.NOT_ASKED, 0, 1, CHARGE_SCHEDULE,
                              RESOLVE)
    assert no_token.status is P.REFUND_FAILED and d.manual_refund_required(no_token.status)
    exhausted = d.after_charge(P.CANCEL_REQUESTED, d.Outcome.UNAVAILABLE, 1, RESOLVE,
                               CHARGE_SCHEDULE, RESOLVE)
    assert exhausted.status is P.REFUND_FAILED and exhausted.emit is d.Emit.FALLO_REEMBOLSO


@pytest.mark.parametrize("charges_made", [1, 3, 4])
def test_a_cancelled_charge_is_replayed_its_whole_budget_whatever_its_charge_calls_used(
        charges_made: int) -> None:
    """The replays that resolve a cancellation count apart from the charge's own calls (a
    gateway outage through the charge's retries used four): every replay but the last that
    stays unknown is followed by another."""
    waits = [d.after_charge(P.CANCEL_REQUESTED, d.Outcome.UNAVAILABLE, charges_made, n,
                            CHARGE_SCHEDULE, RESOLVE).retry_in_s
             for n in range(1, RESOLVE)]
    assert waits == [2.0, 8.0, 18.0, 18.0]
    last = d.after_charge(P.CANCEL_REQUESTED, d.Outcome.UNAVAILABLE, charges_made, RESOLVE,
                          CHARGE_SCHEDULE, RESOLVE)
    assert last.status is P.REFUND_FAILED and last.alert == "cancelled_charge_unresolved"


def test_a_charge_call_answered_unknown_after_the_cancellation_leaves_every_replay() -> None:
    """It was no replay (``replays_made`` 0): the first replay follows, a first retry's wait
    later."""
    change = d.after_charge(P.CANCEL_REQUESTED, d.Outcome.UNAVAILABLE, 4, 0, CHARGE_SCHEDULE,
                            RESOLVE)
    assert change.status is None and change.retry_in_s == 2.0


@pytest.mark.parametrize("outcome", [d.Outcome.REJECTED, d.Outcome.UNAVAILABLE])
def test_only_a_declined_replay_proves_a_cancelled_charge_never_happened(
        outcome: d.Outcome) -> None:
    """A 4xx other than a decline (the key reused with other parameters, a request still in
    progress) says nothing about the first call: resolved again, never CANCELLED on it."""
    assert d.after_charge(P.CANCEL_REQUESTED, d.Outcome.DECLINED, 1, 1, CHARGE_SCHEDULE,
                          RESOLVE).status is P.CANCELLED
    unknown = d.after_charge(P.CANCEL_REQUESTED, outcome, 1, 1, CHARGE_SCHEDULE, RESOLVE)
    assert unknown.status is None and unknown.retry_in_s is not None


def test_a_late_approval_of_a_charge_given_up_on_captures_it() -> None:
    late = d.after_charge(P.CHARGE_FAILED, d.Outcome.APPROVED, 4, 0, CHARGE_SCHEDULE, RESOLVE)
    assert late.status is P.CAPTURED and late.emit is d.Emit.PAGO_EXITOSO


def test_the_token_is_kept_while_the_charge_may_have_to_be_replayed() -> None:
    assert P.CHARGE_FAILED in d.TOKEN_NEEDED and P.CANCEL_REQUESTED in d.TOKEN_NEEDED
    assert P.CAPTURED not in d.TOKEN_NEEDED and P.REFUND_FAILED not in d.TOKEN_NEEDED


@pytest.mark.parametrize("status", [P.DECLINED, P.CANCELLED, P.REFUNDING, P.REFUNDED,
                                    P.REFUND_FAILED, P.CANCEL_REQUESTED])
def test_cancellation_twice_or_after_the_end_does_nothing(status: P) -> None:
    assert d.on_order_cancelled(status, True) == d.NOTHING


class PaymentRace(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.status: P | None = None
        self.charge_attempts = 0
        self.replays = 0              # charge calls sent while CANCEL_REQUESTED
        self.refund_attempts = 0
        self.in_flight = False        # a charge call has been sent and not answered
        self.sent_as: d.PaymentStatus | None = None  # the status the call in flight left in
        self.charge_sent = False      # leased for a charge call at least once
        self.charged = 0              # what the gateway really captured (0 or 1)
        self.refunded = 0
        self.compensate = False       # a cancellation or an allocation failure was delivered
        self.refund_works = True

    def _apply(self, change: d.Change) -> None:
        if change.status is not None:
            self.status = change.status

    @rule()
    def stock_verified(self) -> None:
        if self.status is None:
            self.status = P.CHARGING

    @rule()
    def order_cancelled(self) -> None:
        self.compensate = True
        change = d.on_order_cancelled(self.status, self.charge_sent)
        self._apply(change)

    @precondition(lambda self: self.status in (P.CAPTURED, P.CHARGING))
    @rule()
    def allocation_failed(self) -> None:
        self.compensate = True
        self._apply(d.on_allocation_failed(self.status, self.charge_sent))

    @precondition(lambda self: self.status in d.CHARGE_WORK and not self.in_flight)
    @rule()
    def send_charge(self) -> None:
        self.in_flight = self.charge_sent = True
        self.sent_as = self.status

    @precondition(lambda self: self.in_flight)
    @rule(outcome=st.sampled_from(list(d.Outcome)), went_through=st.booleans())
    def charge_answered(self, outcome: d.Outcome, went_through: bool) -> None:
        self.in_flight = False
        # The gateway's idempotency key: a charge happens at most once per saga.
        if outcome is d.Outcome.APPROVED or (outcome is d.Outcome.UNAVAILABLE and went_through):
            self.charged = 1
        if self.charged and outcome is not d.Outcome.UNAVAILABLE:
            outcome = d.Outcome.APPROVED  # a replayed key answers what it did the first time
        if self.sent_as is P.CANCEL_REQUESTED:
            self.replays += 1
        else:
            self.charge_attempts += 1
        assert self.status is not None
        change = d.after_charge(self.status, outcome, self.charge_attempts, self.replays,
                                CHARGE_SCHEDULE, RESOLVE)
        if (self.status is P.CANCEL_REQUESTED and change.status is P.REFUND_FAILED
                and outcome is not d.Outcome.NOT_ASKED):
            assert self.replays == RESOLVE, "given up on before its every replay"
        self._apply(change)

    @precondition(lambda self: self.status is P.REFUNDING)
    @rule(works=st.booleans())
    def refund_answered(self, works: bool) -> None:
        ok = works and self.refund_works
        if ok:
            self.refunded = self.charged
        self.refund_attempts += 1
        self._apply(d.after_refund(P.REFUNDING, ok, self.refund_attempts, REFUND_SCHEDULE))

    @invariant()
    def never_refunds_more_than_charged(self) -> None:
        assert self.refunded <= self.charged

    @invariant()
    def captured_means_charged(self) -> None:
        if self.status in (P.CAPTURED, P.REFUNDING, P.REFUNDED):
            assert self.charged == 1

    @invariant()
    def once_settled_a_compensated_payment_has_no_net_charge(self) -> None:
        settled = self.status not in (*d.CHARGE_WORK, *d.REFUND_WORK) and not self.in_flight
        if settled and self.compensate and self.status is not P.REFUND_FAILED \
                and self.status is not P.CHARGE_FAILED:
            assert self.charged - self.refunded == 0, self.status


TestPaymentRace = PaymentRace.TestCase
TestPaymentRace.settings = settings(max_examples=400, stateful_step_count=40, deadline=None)
