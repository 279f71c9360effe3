"""A model of the reservation rules (reserve_then_pay and ``auto`` beside Check-Then-Pay),
driven by Hypothesis through every interleaving of several sagas on one product: validations,
payments (duplicated, late, after their reservation expired), cancellations (duplicated, racing
the payment), the expiry job and the clock. Its decisions are inventario's domain's wherever
the domain has them (whether an order reserves: ``order_reserves``, the ``auto`` rule; what is
short: ``shortages``; whether a payment allocates and what a cancellation does:
``on_payment_succeeded``, ``on_order_cancelled``); the rest is the model's.

The rules, as the model states them:

- available = units on hand − the units other sagas hold in live reservations (RESERVED and
  ``expires_at`` after now), for every strategy;
- validation of an order that reserves (reserve_then_pay, or ``auto`` while the units of
  Check-Then-Pay orders in flight approach what is available) holds the units (RESERVED until
  now + TTL) when they are available (for ``auto``: beside those orders in flight), and
  otherwise turns the order away; under Check-Then-Pay it only checks them;
- a payment whose saga holds a live reservation confirms it: the units are taken and the
  reservation is CONFIRMED; any other payment takes the Check-Then-Pay path (allocated when
  available, else FAILED: the charge is refunded);
- a cancellation releases a RESERVED reservation once, gives back allocated units once, and
  blocks a saga not allocated yet;
- the expiry job marks RESERVED reservations past their deadline EXPIRED (availability never
  waits for it: it counts only live ones).

The invariants are the chaos checker's (tools/chaos/src/chaos/checker.py) and the stock's:
never an oversell, the live reservations within the units on hand, no race lost while a
reservation held the units, every reservation ended once, a cancelled saga holds nothing.

A second machine (``AutoUnderBurst``) validates every order under ``auto``, one after the other
as the products' lock at their commit orders them (inventario.adapters.stock_repository), with
no deadline passing: no Check-Then-Pay order of it ever loses its race (the units it verified
are there at its payment). That is the bound on a burst: none.

Three mutants of the rules (availability that ignores other sagas' reservations; a confirm
that does not ask whether the reservation is still live; an ``auto`` reservation that takes
the units of the Check-Then-Pay orders in flight) are run on an interleaving each that they get
wrong: the invariants catch each, so the models are not vacuous.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from inventario.domain.allocation_strategy import AllocationStrategy, Demand, order_reserves
from inventario.domain.stock import (
    AllocationDecision,
    AllocationStatus,
    Line,
    ReleaseDecision,
    on_order_cancelled,
    on_payment_succeeded,
    shortages,
)

TTL_S = 120
UNITS = 6
MAX_SAGAS = 8
SKU = "SKU-A"
AUTO_RATIO = 0.5


@dataclass(frozen=True)
class Rules:
    """The rules as written, or a mutant of them."""

    others_reservations_count: bool = True
    confirm_only_while_live: bool = True
    reservations_leave_checked_in_flight: bool = True
    """An ``auto`` reservation holds only units the Check-Then-Pay orders in flight leave."""


@dataclass
class Saga:
    requested: int
    reserves: bool
    verified: bool
    validated_at: int
    reservation: str | None = None       # RESERVED | CONFIRMED | RELEASED | EXPIRED
    expires_at: int = 0
    allocation: AllocationStatus | None = None
    cancelled: bool = False
    releases: int = 0
    paid_while_held: bool = False
    """Its payment came while its reservation was RESERVED and live."""


@dataclass
class Product:
    on_hand: int = UNITS
    sagas: list[Saga] = field(default_factory=list)
    now: int = 0

    def live(self, s: Saga) -> bool:
        return s.reservation == "RESERVED" and s.expires_at > self.now

    def held_by_others(self, me: Saga | None) -> int:
        return sum(s.requested for s in self.sagas if s is not me and self.live(s))

    def available(self, me: Saga | None, rules: Rules) -> int:
        return self.on_hand - (self.held_by_others(me) if rules.others_reservations_count else 0)

    def in_flight(self) -> int:
        """Units of Check-Then-Pay orders in flight: verified within the TTL, not allocated
        yet, holding no live reservation (the ``auto`` rule's demand)."""
        return sum(s.requested for s in self.sagas if s.verified and s.allocation is None
                   and s.validated_at > self.now - TTL_S and not self.live(s))

    def short(self, requested: int, available: int) -> bool:
        return bool(shortages([Line(SKU, requested)], {SKU: available}))


class ReservationsUnderChaos(RuleBasedStateMachine):
    rules_in_force = Rules()

    def __init__(self) -> None:
        super().__init__()
        self.p = Product()

    # --- the events -------------------------------------------------------------------

    @precondition(lambda self: len(self.p.sagas) < MAX_SAGAS)
    @rule(requested=st.integers(1, 3), strategy=st.sampled_from(AllocationStrategy))
    def validate(self, requested: int, strategy: AllocationStrategy) -> None:
        """OrdenSolicitada: an order that reserves holds the units, any other checks them."""
        available, in_flight = self.p.available(None, self.rules_in_force), self.p.in_flight()
        reserves = order_reserves({SKU: strategy}, [Demand(SKU, requested, available,
                                                           in_flight)], AUTO_RATIO)
        if (reserves and strategy is AllocationStrategy.AUTO
                and self.rules_in_force.reservations_leave_checked_in_flight):
            available = max(0, available - in_flight)
        ok = not self.p.short(requested, available)
        saga = Saga(requested, reserves, verified=ok, validated_at=self.p.now)
        if ok and reserves:
            saga.reservation, saga.expires_at = "RESERVED", self.p.now + TTL_S
        self.p.sagas.append(saga)

    def _saga(self, data: st.DataObject, verified: bool = False) -> Saga | None:
        chosen = [s for s in self.p.sagas if s.verified or not verified]
        return data.draw(st.sampled_from(chosen)) if chosen else None

    @rule(data=st.data())
    def payment_succeeded(self, data: st.DataObject) -> None:
        """PagoExitoso (pagos charges only a verified order), duplicated or late."""
        saga = self._saga(data, verified=True)
        if saga is not None:
            self._pay(saga)

    @rule(data=st.data(), after_s=st.integers(0, 30))
    def payment_after_expiry(self, data: st.DataObject, after_s: int) -> None:
        """The clock runs past a held reservation's deadline before its payment comes."""
        held = [s for s in self.p.sagas if s.reservation == "RESERVED"]
        if held:
            saga = data.draw(st.sampled_from(held))
            self.p.now = max(self.p.now, saga.expires_at + after_s)
            self._pay(saga)

    def _pay(self, saga: Saga) -> None:
        if on_payment_succeeded(saga.allocation) is AllocationDecision.IGNORE:
            return  # allocated, failed, released or blocked already: a duplicate changes nothing
        live = self.p.live(saga)
        if saga.reservation == "RESERVED" and (live or not self.rules_in_force
                                               .confirm_only_while_live):
            saga.paid_while_held = live
            self.p.on_hand -= saga.requested
            saga.reservation, saga.allocation = "CONFIRMED", AllocationStatus.ALLOCATED
        elif not self.p.short(saga.requested, self.p.available(saga, self.rules_in_force)):
            self.p.on_hand -= saga.requested
            saga.allocation = AllocationStatus.ALLOCATED
        else:
            saga.allocation = AllocationStatus.FAILED  # FalloAsignacion: the charge is refunded

    @rule(data=st.data())
    def order_cancelled(self, data: st.DataObject) -> None:
        """OrdenCancelada (decline, cancel, timeout), duplicated, racing the payment."""
        saga = self._saga(data)
        if saga is None:
            return
        saga.cancelled = True
        if saga.reservation == "RESERVED":
            saga.reservation, saga.releases = "RELEASED", saga.releases + 1
        decision = on_order_cancelled(saga.allocation)
        if decision is ReleaseDecision.RELEASE:
            self.p.on_hand += saga.requested
            saga.allocation = AllocationStatus.RELEASED
        elif decision is ReleaseDecision.BLOCK:
            saga.allocation = AllocationStatus.BLOCKED

    @rule(seconds=st.integers(1, 150))
    def time_passes(self, seconds: int) -> None:
        self.p.now += seconds

    @rule()
    def expiry_job(self) -> None:
        for s in self.p.sagas:
            if s.reservation == "RESERVED" and s.expires_at <= self.p.now:
                s.reservation = "EXPIRED"

    # --- the invariants ---------------------------------------------------------------

    @invariant()
    def never_an_oversell(self) -> None:
        taken = sum(s.requested for s in self.p.sagas
                    if s.allocation is AllocationStatus.ALLOCATED)
        assert self.p.on_hand >= 0, "units on hand went negative"
        assert UNITS - self.p.on_hand == taken, "units taken and units allocated disagree"

    @invariant()
    def live_reservations_within_stock(self) -> None:
        assert self.p.held_by_others(None) <= self.p.on_hand

    @invariant()
    def no_race_lost_while_held(self) -> None:
        for s in self.p.sagas:
            assert not (s.paid_while_held and s.allocation is AllocationStatus.FAILED)
            if s.reservation == "CONFIRMED":
                assert s.allocation in (AllocationStatus.ALLOCATED, AllocationStatus.RELEASED)

    @invariant()
    def every_reservation_ends_once(self) -> None:
        for s in self.p.sagas:
            assert s.releases <= 1
            assert s.reservation is None or s.reserves

    @invariant()
    def a_cancelled_saga_holds_nothing(self) -> None:
        for s in self.p.sagas:
            if s.cancelled:
                assert (s.reservation != "RESERVED"
                        and s.allocation is not AllocationStatus.ALLOCATED)


TestReservationsUnderChaos = ReservationsUnderChaos.TestCase
TestReservationsUnderChaos.settings = settings(max_examples=200, stateful_step_count=25,
                                               deadline=None)


class AutoUnderBurst(RuleBasedStateMachine):
    """A product under ``auto``: orders validated one after the other, paid, cancelled."""

    rules_in_force = Rules()

    def __init__(self) -> None:
        super().__init__()
        machine = ReservationsUnderChaos()
        machine.rules_in_force = self.rules_in_force
        self.m = machine

    @precondition(lambda self: len(self.m.p.sagas) < MAX_SAGAS)
    @rule(requested=st.integers(1, 3))
    def validate(self, requested: int) -> None:
        self.m.validate(requested, AllocationStrategy.AUTO)

    @rule(data=st.data())
    def payment_succeeded(self, data: st.DataObject) -> None:
        self.m.payment_succeeded(data)

    @rule(data=st.data())
    def order_cancelled(self, data: st.DataObject) -> None:
        self.m.order_cancelled(data)

    @invariant()
    def no_check_then_pay_order_loses_its_race(self) -> None:
        for s in self.m.p.sagas:
            assert not (s.verified and not s.reserves
                        and s.allocation is AllocationStatus.FAILED), "a race lost"

    @invariant()
    def the_invariants_of_every_strategy(self) -> None:
        _invariants(self.m)


TestAutoUnderBurst = AutoUnderBurst.TestCase
TestAutoUnderBurst.settings = settings(max_examples=200, stateful_step_count=25,
                                       deadline=None)


def _invariants(machine: ReservationsUnderChaos) -> None:
    machine.never_an_oversell()
    machine.live_reservations_within_stock()
    machine.no_race_lost_while_held()
    machine.every_reservation_ends_once()
    machine.a_cancelled_saga_holds_nothing()


def _expired_reservation_paid_after_others_took_its_units(machine: ReservationsUnderChaos
                                                          ) -> None:
    """A holds 3 of 6 units; its deadline passes (the expiry job not run yet); B and C hold
    the 6 then on hand; A's payment comes."""
    machine.validate(3, AllocationStrategy.RESERVE_THEN_PAY)
    machine.time_passes(TTL_S + 30)
    machine.validate(3, AllocationStrategy.RESERVE_THEN_PAY)
    machine.validate(3, AllocationStrategy.RESERVE_THEN_PAY)
    machine._pay(machine.p.sagas[0])
    _invariants(machine)


def _three_sagas_hold_what_two_can(machine: ReservationsUnderChaos) -> None:
    for _ in range(3):
        machine.validate(3, AllocationStrategy.RESERVE_THEN_PAY)
        _invariants(machine)


def _a_reservation_beside_orders_in_flight(machine: ReservationsUnderChaos) -> None:
    """Two single units verified under ``auto`` without reserving (in flight); two orders of
    3 then reserve (the rule says so); the first order's payment comes."""
    for requested in (1, 1, 3, 3):
        machine.validate(requested, AllocationStrategy.AUTO)
    assert [s.reserves for s in machine.p.sagas] == [False, False, True, True]
    machine._pay(machine.p.sagas[0])
    _invariants(machine)
    assert machine.p.sagas[0].allocation is AllocationStatus.ALLOCATED, "a race lost"


Scenario = Callable[[ReservationsUnderChaos], None]
SCENARIOS: list[Scenario] = [_expired_reservation_paid_after_others_took_its_units,
                             _three_sagas_hold_what_two_can,
                             _a_reservation_beside_orders_in_flight]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_rules_as_written_keep_the_invariants_where_the_mutants_break_them(
        scenario: Scenario) -> None:
    scenario(ReservationsUnderChaos())


@pytest.mark.parametrize(("mutant", "scenario"), [
    (Rules(others_reservations_count=False), _three_sagas_hold_what_two_can),
    (Rules(confirm_only_while_live=False), _expired_reservation_paid_after_others_took_its_units),
    (Rules(reservations_leave_checked_in_flight=False), _a_reservation_beside_orders_in_flight),
], ids=["availability ignores reservations", "confirm after expiry",
        "auto reserves the units of orders in flight"])
def test_the_invariants_catch_rules_that_break_them(mutant: Rules, scenario: Scenario) -> None:
    # A concrete interleaving per mutant, not a search: the model is not vacuous on every run.
    class Mutant(ReservationsUnderChaos):
        rules_in_force = mutant

    with pytest.raises(AssertionError):
        scenario(Mutant())
