"""The events pagos emits about a payment, built from the payment as it was read.

A payment row keeps what its charge was asked for with (order, amount, currency), absent only
on a row recorded without a charge, which never emits these: an event that would lack one, or
a gateway's answer without its id, is refused before anything is written, as its schema
would refuse it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TypeVar, cast, get_args

from pagos.domain.payment import Payment
from saga_contracts.events.fields import Currency
from saga_contracts.events.payments import (
    FalloReembolso,
    PagoExitoso,
    PagoRechazado,
    ReembolsoEjecutado,
)

T = TypeVar("T")
_CURRENCIES = frozenset(get_args(Currency))


def _kept(payment: Payment, what: str, value: T | None) -> T:
    if value is None:
        raise ValueError(f"the payment of saga {payment.saga_id} has no {what}")
    return value


def _order_id(payment: Payment) -> str:
    return _kept(payment, "order id", payment.order_id)


def _charged(payment: Payment) -> tuple[Decimal, Currency]:
    amount = _kept(payment, "amount", payment.amount)
    currency = _kept(payment, "currency", payment.currency)
    if currency not in _CURRENCIES:
        raise ValueError(f"the payment of saga {payment.saga_id} is in {currency!r}, "
                         "a currency no event carries")
    return amount, cast(Currency, currency)


def pago_exitoso(payment: Payment, charge_id: str | None) -> PagoExitoso:
    amount, currency = _charged(payment)
    return PagoExitoso(order_id=_order_id(payment), payment_id=payment.payment_id,
                       charge_id=_kept(payment, "charge id", charge_id), amount=amount,
                       currency=currency)


def pago_rechazado(payment: Payment, decline_code: str, reason: str) -> PagoRechazado:
    return PagoRechazado(order_id=_order_id(payment), payment_id=payment.payment_id,
                         decline_code=decline_code, reason=reason)


def reembolso_ejecutado(payment: Payment, refund_id: str | None) -> ReembolsoEjecutado:
    amount, currency = _charged(payment)
    return ReembolsoEjecutado(order_id=_order_id(payment), payment_id=payment.payment_id,
                              refund_id=_kept(payment, "refund id", refund_id), amount=amount,
                              currency=currency)


def fallo_reembolso(payment: Payment, attempts: int, reason: str) -> FalloReembolso:
    return FalloReembolso(order_id=_order_id(payment), payment_id=payment.payment_id,
                          reason=reason, attempts=attempts)
