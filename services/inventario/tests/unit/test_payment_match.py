"""payment_mismatch: a payment is the saga's only if it pays what its stock check asked for."""

from __future__ import annotations

from decimal import Decimal

import pytest

from inventario.domain.payment_match import Money, PaymentMismatch, payment_mismatch

REQUESTED = Money(Decimal("12.50"), "EUR")


@pytest.mark.parametrize("paid", [Money(Decimal("12.50"), "EUR"), Money(Decimal("12.5"), "EUR")])
def test_the_requested_amount_in_the_requested_currency_matches(paid: Money) -> None:
    assert payment_mismatch(REQUESTED, paid) is None


@pytest.mark.parametrize(("paid", "mismatch"), [
    (Money(Decimal("12.49"), "EUR"), PaymentMismatch.AMOUNT),
    (Money(Decimal("0.00"), "EUR"), PaymentMismatch.AMOUNT),
    (Money(Decimal("12.50"), "USD"), PaymentMismatch.CURRENCY),
    # Another currency makes the amount meaningless: reported as the currency.
    (Money(Decimal("13.00"), "USD"), PaymentMismatch.CURRENCY),
])
def test_another_amount_or_currency_is_not_the_sagas_payment(paid: Money,
                                                              mismatch: PaymentMismatch) -> None:
    assert payment_mismatch(REQUESTED, paid) is mismatch


def test_a_saga_that_requested_nothing_was_paid_nothing_of_its_own() -> None:
    assert payment_mismatch(None, REQUESTED) is PaymentMismatch.NO_PAYMENT_REQUESTED


def test_the_reasons_are_the_metrics_labels() -> None:
    assert [m.value for m in PaymentMismatch] == [
        "amount_mismatch", "currency_mismatch", "no_payment_requested"]
