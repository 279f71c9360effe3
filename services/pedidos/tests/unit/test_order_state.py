"""The order state machine, including duplicated, reordered and late events (Hypothesis), and
an order that completes only once both its payment and its allocation are in."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pedidos.domain.order import (
    ACTIVE,
    TERMINAL,
    AllocationBeforePayment,
    Annotation,
    CancelReason,
    CannotCancel,
    Money,
    OrderStatus,
    PaymentMismatch,
    RefundStatus,
    Transition,
    on_cancel_requested,
    on_event,
    on_saga_deadline,
    on_step_deadline,
    payment_mismatch,
)

S = OrderStatus


@pytest.mark.parametrize(("status", "event", "to"), [
    (S.PENDIENTE_VALIDACION, "StockVerificado", S.PENDIENTE_PAGO),
    (S.PENDIENTE_VALIDACION, "StockNoDisponible", S.CANCELADA_SIN_STOCK),
    (S.PENDIENTE_VALIDACION, "PrecioRechazado", S.CANCELADA_PRECIO_RECHAZADO),
    (S.PENDIENTE_VALIDACION, "PrecioRechazado_v2", S.CANCELADA_PRECIO_RECHAZADO),
    (S.PENDIENTE_PAGO, "PagoExitoso", S.PENDIENTE_ASIGNACION),
    (S.PENDIENTE_PAGO, "PagoRechazado", S.CANCELADA_PAGO_RECHAZADO),
    (S.PENDIENTE_ASIGNACION, "StockAsignado", S.COMPLETADA),
    (S.PENDIENTE_ASIGNACION, "FalloAsignacion", S.PENDIENTE_REEMBOLSO),
    (S.PENDIENTE_REEMBOLSO, "ReembolsoEjecutado", S.CANCELADA_CON_REEMBOLSO),
    (S.PENDIENTE_REEMBOLSO, "FalloReembolso", S.REEMBOLSO_FALLIDO),
    # Overtaking: an event from another topic arrives before the one it depends on.
    (S.PENDIENTE_VALIDACION, "PagoExitoso", S.PENDIENTE_ASIGNACION),
    (S.PENDIENTE_ASIGNACION, "ReembolsoEjecutado", S.CANCELADA_CON_REEMBOLSO),
])
def test_standard_transitions(status: OrderStatus, event: str, to: OrderStatus) -> None:
    decision = on_event(status, event, stock_allocated=False)
    assert isinstance(decision, Transition) and decision.to is to


@pytest.mark.parametrize("status", [S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO])
def test_an_allocation_before_the_payment_is_recorded_and_waits_for_it(
        status: OrderStatus) -> None:
    """Not COMPLETADA: an order whose payment never came (or was declined) is not done."""
    assert on_event(status, "StockAsignado",
                    stock_allocated=False) == AllocationBeforePayment()


@pytest.mark.parametrize("status", [S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO])
def test_the_payment_completes_an_order_whose_stock_was_allocated_first(
        status: OrderStatus) -> None:
    decision = on_event(status, "PagoExitoso", stock_allocated=True)
    assert decision == Transition(S.COMPLETADA) and decision.completes


@pytest.mark.parametrize("status", [S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO])
def test_a_declined_payment_cancels_an_order_whose_stock_was_allocated_first(
        status: OrderStatus) -> None:
    """OrdenCancelada then makes inventario release the stock."""
    decision = on_event(status, "PagoRechazado", stock_allocated=True)
    assert decision == Transition(S.CANCELADA_PAGO_RECHAZADO, CancelReason.PAGO_RECHAZADO)
    assert decision.cancels


@pytest.mark.parametrize("status", [S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO])
def test_a_second_allocation_before_the_payment_changes_nothing(status: OrderStatus) -> None:
    assert on_event(status, "StockAsignado", stock_allocated=True) is None


def test_an_allocation_recorded_before_the_payment_does_not_stop_the_deadlines() -> None:
    """The step's deadline still cancels the order that waits for its payment (the deadline
    does not ask about the allocation: OrdenCancelada releases it)."""
    assert on_step_deadline(S.PENDIENTE_PAGO) == Transition(S.CANCELADA_TIMEOUT,
                                                            CancelReason.TIMEOUT)


@pytest.mark.parametrize(("status", "event"), [
    (S.PENDIENTE_PAGO, "StockVerificado"),          # duplicate by meaning
    (S.PENDIENTE_ASIGNACION, "StockVerificado"),    # late
    (S.COMPLETADA, "PagoExitoso"),                  # late, terminal
    (S.CANCELADA_TIMEOUT, "StockAsignado"),         # after a timeout: compensation handles it
    (S.CANCELADA_PAGO_RECHAZADO, "StockAsignado"),  # after a declined payment: the same
    (S.PENDIENTE_ASIGNACION, "StockNoDisponible"),  # impossible story: ignored
    (S.PENDIENTE_ASIGNACION, "PrecioRechazado"),    # impossible story: ignored
    (S.PENDIENTE_ASIGNACION, "PrecioRechazado_v2"),
    (S.CANCELADA_PRECIO_RECHAZADO, "PrecioRechazado"),  # the twin of one handled: nothing
])
def test_stale_events_change_nothing(status: OrderStatus, event: str) -> None:
    assert on_event(status, event, stock_allocated=False) is None


def test_a_late_refund_is_recorded_on_a_terminal_order() -> None:
    assert on_event(S.CANCELADA_TIMEOUT, "ReembolsoEjecutado",
                    stock_allocated=False) == Annotation(RefundStatus.REFUNDED)
    assert on_event(S.CANCELADA_POR_USUARIO, "FalloReembolso",
                    stock_allocated=True) == Annotation(RefundStatus.FAILED)


ORDER = Money(Decimal("10.00"), "USD")


@pytest.mark.parametrize("paid", [Money(Decimal("10.00"), "USD"), Money(Decimal("10"), "USD")])
def test_a_payment_of_the_orders_total_in_its_currency_is_the_orders(paid: Money) -> None:
    assert payment_mismatch(ORDER, paid) is None


@pytest.mark.parametrize(("paid", "mismatch"), [
    (Money(Decimal("9.99"), "USD"), PaymentMismatch.AMOUNT),
    (Money(Decimal("10.01"), "USD"), PaymentMismatch.AMOUNT),
    (Money(Decimal("10.00"), "EUR"), PaymentMismatch.CURRENCY),
    (Money(Decimal("37.00"), "PEN"), PaymentMismatch.CURRENCY),
])
def test_any_other_payment_is_not_the_orders(paid: Money, mismatch: PaymentMismatch) -> None:
    assert payment_mismatch(ORDER, paid) is mismatch


def test_cancel_only_while_active_and_not_already_compensating() -> None:
    assert on_cancel_requested(S.PENDIENTE_PAGO).to is S.CANCELADA_POR_USUARIO
    for status in [*TERMINAL, S.PENDIENTE_REEMBOLSO]:
        with pytest.raises(CannotCancel):
            on_cancel_requested(status)


def test_deadlines() -> None:
    assert on_step_deadline(S.PENDIENTE_ASIGNACION).to is S.CANCELADA_TIMEOUT  # type: ignore[union-attr]
    assert on_step_deadline(S.PENDIENTE_REEMBOLSO) is None
    assert on_saga_deadline(S.PENDIENTE_REEMBOLSO).to is S.TIMED_OUT  # type: ignore[union-attr]
    assert on_saga_deadline(S.COMPLETADA) is None


# What the participants can emit for one saga, by how the saga went; the last two with a
# StockAsignado written by whoever holds inventario's principal, for a saga never paid.
STORIES = {
    "happy": ["StockVerificado", "PagoExitoso", "StockAsignado"],
    "no_stock": ["StockNoDisponible"],
    "price_refused": ["PrecioRechazado"],
    "declined": ["StockVerificado", "PagoRechazado"],
    "race_lost": ["StockVerificado", "PagoExitoso", "FalloAsignacion", "ReembolsoEjecutado"],
    "refund_failed": ["StockVerificado", "PagoExitoso", "FalloAsignacion", "FalloReembolso"],
    "forged_allocation_declined": ["StockVerificado", "PagoRechazado", "StockAsignado"],
    "forged_allocation_unpaid": ["StockVerificado", "StockAsignado"],
}
RANK = {S.PENDIENTE_VALIDACION: 0, S.PENDIENTE_PAGO: 1, S.PENDIENTE_ASIGNACION: 2,
        S.PENDIENTE_REEMBOLSO: 3}
# The events an outcome needs to have seen: a completed order, both its payment and its stock.
PROOF = {S.COMPLETADA: {"PagoExitoso", "StockAsignado"},
         S.CANCELADA_SIN_STOCK: {"StockNoDisponible"},
         S.CANCELADA_PRECIO_RECHAZADO: {"PrecioRechazado"},
         S.CANCELADA_PAGO_RECHAZADO: {"PagoRechazado"},
         S.CANCELADA_CON_REEMBOLSO: {"ReembolsoEjecutado"},
         S.REEMBOLSO_FALLIDO: {"FalloReembolso"}}


class OrderUnderChaos(RuleBasedStateMachine):
    """Delivers a saga's events duplicated and in any order, with cancels and deadlines."""

    @initialize(story=st.sampled_from(sorted(STORIES)))
    def start(self, story: str) -> None:
        self.events = STORIES[story]
        self.status = S.PENDIENTE_VALIDACION
        self.delivered: set[str] = set()
        self.terminal_at: OrderStatus | None = None
        self.refund: RefundStatus | None = None
        self.stock_allocated = False

    def _apply(self, decision: Transition | Annotation | AllocationBeforePayment | None
               ) -> None:
        before = self.status
        if isinstance(decision, AllocationBeforePayment):
            assert before in (S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO)
            assert not self.stock_allocated, "recorded once"
            self.stock_allocated = True
        elif isinstance(decision, Transition):
            assert before not in TERMINAL, "a terminal order never changes"
            if decision.to in ACTIVE:
                assert RANK[decision.to] > RANK[before], "active states only move forward"
            self.status = decision.to
        elif isinstance(decision, Annotation):
            assert before in TERMINAL
            self.refund = decision.refund_status

    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        event = data.draw(st.sampled_from(self.events))
        self.delivered.add(event)
        self._apply(on_event(self.status, event, stock_allocated=self.stock_allocated))

    @rule()
    def cancel(self) -> None:
        try:
            self._apply(on_cancel_requested(self.status))
        except CannotCancel:
            assert self.status in TERMINAL or self.status is S.PENDIENTE_REEMBOLSO

    @rule()
    def step_deadline(self) -> None:
        self._apply(on_step_deadline(self.status))

    @precondition(lambda self: self.status in ACTIVE)
    @rule()
    def saga_deadline(self) -> None:
        self._apply(on_saga_deadline(self.status))

    @invariant()
    def terminal_states_are_final(self) -> None:
        if self.terminal_at is not None:
            assert self.status is self.terminal_at
        elif self.status in TERMINAL:
            self.terminal_at = self.status

    @invariant()
    def outcomes_are_proven_by_events(self) -> None:
        proof = PROOF.get(self.status)
        if proof is not None:
            assert proof <= self.delivered, (self.status, self.delivered)

    @invariant()
    def an_order_never_waits_once_its_payment_and_allocation_are_in(self) -> None:
        """Whichever came first, the second completes the order (unless it ended before)."""
        if {"PagoExitoso", "StockAsignado"} <= self.delivered:
            assert self.status in TERMINAL, (self.status, self.delivered)


TestOrderUnderChaos = OrderUnderChaos.TestCase
TestOrderUnderChaos.settings = settings(max_examples=300, stateful_step_count=30, deadline=None)
