"""Whether a payment is the one the saga asked for, free of infrastructure.

The stock check that verifies a saga asks pagos for the order's total (StockVerificado) and
keeps what it asked; a PagoExitoso that does not pay exactly that, or comes for a saga that
was never verified, is not the saga's payment and must take no stock.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str


class PaymentMismatch(StrEnum):
    """How a payment differs from what the saga asked for (the ``reason`` it is counted
    under)."""

    AMOUNT = "amount_mismatch"
    CURRENCY = "currency_mismatch"
    NO_PAYMENT_REQUESTED = "no_payment_requested"


def payment_mismatch(requested: Money | None, paid: Money) -> PaymentMismatch | None:
    """None when ``paid`` is what the saga requested (``requested`` None: it requested
    nothing). Amounts compare as numbers (12.5 is 12.50); another currency is reported as
    such whatever the amount, which means nothing in it."""
    if requested is None:
        return PaymentMismatch.NO_PAYMENT_REQUESTED
    if paid.currency != requested.currency:
        return PaymentMismatch.CURRENCY
    if paid.amount != requested.amount:
        return PaymentMismatch.AMOUNT
    return None
