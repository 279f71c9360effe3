"""The order's state machine (docs/standard.md#pedidos-the-state-coordinator), free of infrastructure.

Events of one saga arrive on different topics, so they are not ordered relative to each other:
a PagoExitoso can arrive before the StockVerificado it depends on. The machine therefore moves
*forward* on any event that proves progress and ignores events that are behind the current
state; terminal states never change. The repository applies each decision as a conditional
update (``WHERE status = :expected``), so a duplicated or stale event changes nothing.

One exception to "forward on any proof of progress": an order completes only once both its
payment and its allocation are in. inventario allocates only after it consumed PagoExitoso, but
pedidos reads payment-events and inventory-events independently, so a genuine StockAsignado
can overtake its PagoExitoso here. Such a StockAsignado moves nothing: the saga records that its
stock is allocated and keeps waiting for the payment under its deadline. Completing on it would
let whoever can write a StockAsignado complete an order that was never paid, or whose payment
was declined.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

# The saga's type, as its row and its metrics name it (docs/standard.md#the-saga-table).
SAGA_TYPE = "OrderCheckThenPay"


class OrderStatus(StrEnum):
    PENDIENTE_VALIDACION = "PENDIENTE_VALIDACION"
    PENDIENTE_PAGO = "PENDIENTE_PAGO"
    PENDIENTE_ASIGNACION = "PENDIENTE_ASIGNACION"
    # Allocation failed after the charge: waiting for pagos to confirm the refund.
    PENDIENTE_REEMBOLSO = "PENDIENTE_REEMBOLSO"
    COMPLETADA = "COMPLETADA"
    CANCELADA_SIN_STOCK = "CANCELADA_SIN_STOCK"
    # An item's price or currency is not its product's catalog price: nothing charged.
    CANCELADA_PRECIO_RECHAZADO = "CANCELADA_PRECIO_RECHAZADO"
    CANCELADA_PAGO_RECHAZADO = "CANCELADA_PAGO_RECHAZADO"
    CANCELADA_CON_REEMBOLSO = "CANCELADA_CON_REEMBOLSO"
    CANCELADA_TIMEOUT = "CANCELADA_TIMEOUT"
    CANCELADA_POR_USUARIO = "CANCELADA_POR_USUARIO"
    # The refund kept failing: pagos marked the payment for manual refund.
    REEMBOLSO_FALLIDO = "REEMBOLSO_FALLIDO"
    TIMED_OUT = "TIMED_OUT"


S = OrderStatus
ACTIVE = frozenset({S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO, S.PENDIENTE_ASIGNACION,
                    S.PENDIENTE_REEMBOLSO})
TERMINAL = frozenset(set(S) - ACTIVE)
# The forward part of the happy path, by progress.
_BEFORE_PAYMENT = frozenset({S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO})
_BEFORE_ALLOCATION = _BEFORE_PAYMENT | {S.PENDIENTE_ASIGNACION}
# A price refusal in either version inventario publishes (PrecioRechazado_v2: its codes in
# English); a saga's is handled once, whichever comes first.
PRICE_REFUSALS = frozenset({"PrecioRechazado", "PrecioRechazado_v2"})

STEP_OF = {
    S.PENDIENTE_VALIDACION: "validacion",
    S.PENDIENTE_PAGO: "pago",
    S.PENDIENTE_ASIGNACION: "asignacion",
    S.PENDIENTE_REEMBOLSO: "reembolso",
}


def owner_of(body: dict[str, Any]) -> str:
    """Whose saga it is: the customer who placed the order (``body``: the request as the saga
    carries it)."""
    return str(body["customer_id"])


class CancelReason(StrEnum):
    STOCK_INSUFICIENTE = "stock_insuficiente"
    PRECIO_RECHAZADO = "precio_rechazado"
    PAGO_RECHAZADO = "pago_rechazado"
    FALLO_ASIGNACION = "fallo_asignacion"
    CANCELADA_POR_USUARIO = "cancelada_por_usuario"
    TIMEOUT = "timeout"
    SAGA_EXPIRADA = "saga_expirada"


class RefundStatus(StrEnum):
    PENDING = "PENDING"
    REFUNDED = "REFUNDED"
    FAILED = "FAILED"


NOTIFICATIONS = {
    S.COMPLETADA: "Tu orden ha sido confirmada",
    S.CANCELADA_SIN_STOCK: "Lo sentimos, el producto está agotado",
    S.CANCELADA_PRECIO_RECHAZADO: ("El precio de tu orden no es el del catálogo; la orden fue "
                                   "cancelada sin cobro"),
    S.CANCELADA_PAGO_RECHAZADO: "Tu pago fue rechazado; la orden fue cancelada",
    S.CANCELADA_CON_REEMBOLSO: ("Tu pago ha sido reembolsado, el producto se agotó durante "
                                "el proceso"),
    S.CANCELADA_TIMEOUT: "Tu orden fue cancelada porque un paso no respondió a tiempo",
    S.CANCELADA_POR_USUARIO: "Tu orden fue cancelada a tu pedido",
    S.REEMBOLSO_FALLIDO: "No pudimos reembolsar tu pago automáticamente; lo haremos a mano",
    S.TIMED_OUT: "Tu orden expiró sin completarse y fue cancelada",
}


@dataclass(frozen=True)
class Transition:
    to: OrderStatus
    cancel_reason: CancelReason | None = None
    refund_status: RefundStatus | None = None

    @property
    def completes(self) -> bool:
        return self.to is S.COMPLETADA

    @property
    def cancels(self) -> bool:
        """Final without the order: OrdenCancelada tells participants to compensate."""
        return self.to in TERMINAL and self.to is not S.COMPLETADA


@dataclass(frozen=True)
class Annotation:
    """No state change, but a fact to record on a terminal order (a late refund outcome)."""

    refund_status: RefundStatus


@dataclass(frozen=True)
class AllocationBeforePayment:
    """StockAsignado before the order's payment: no state change, but the saga records that
    its stock is allocated. Its PagoExitoso then completes the order; if none comes, the step's
    deadline cancels it and OrdenCancelada makes inventario release the stock."""


Decision = Transition | Annotation | AllocationBeforePayment | None


def on_event(status: OrderStatus, event_type: str, *, stock_allocated: bool) -> Decision:
    """What an incoming event does to an order in ``status``; None means nothing.
    ``stock_allocated``: the saga recorded a StockAsignado that came before its payment."""
    if event_type == "StockVerificado" and status is S.PENDIENTE_VALIDACION:
        return Transition(S.PENDIENTE_PAGO)
    if event_type == "StockNoDisponible" and status is S.PENDIENTE_VALIDACION:
        return Transition(S.CANCELADA_SIN_STOCK, CancelReason.STOCK_INSUFICIENTE)
    if event_type in PRICE_REFUSALS and status is S.PENDIENTE_VALIDACION:
        return Transition(S.CANCELADA_PRECIO_RECHAZADO, CancelReason.PRECIO_RECHAZADO)
    if event_type == "PagoExitoso" and status in _BEFORE_PAYMENT:
        # The allocation, already in, waited for this payment: both are in.
        return Transition(S.COMPLETADA if stock_allocated else S.PENDIENTE_ASIGNACION)
    if event_type == "PagoRechazado" and status in _BEFORE_PAYMENT:
        return Transition(S.CANCELADA_PAGO_RECHAZADO, CancelReason.PAGO_RECHAZADO)
    if event_type == "StockAsignado" and status is S.PENDIENTE_ASIGNACION:
        return Transition(S.COMPLETADA)
    if event_type == "StockAsignado" and status in _BEFORE_PAYMENT and not stock_allocated:
        return AllocationBeforePayment()
    if event_type == "FalloAsignacion" and status in _BEFORE_ALLOCATION:
        return Transition(S.PENDIENTE_REEMBOLSO, refund_status=RefundStatus.PENDING)
    if event_type == "ReembolsoEjecutado":
        if status in ACTIVE:
            # Only the allocation failure refunds an active order; the refund may simply have
            # overtaken its FalloAsignacion on another topic.
            return Transition(S.CANCELADA_CON_REEMBOLSO, CancelReason.FALLO_ASIGNACION,
                              RefundStatus.REFUNDED)
        return Annotation(RefundStatus.REFUNDED)
    if event_type == "FalloReembolso":
        if status in ACTIVE:
            return Transition(S.REEMBOLSO_FALLIDO, CancelReason.FALLO_ASIGNACION,
                              RefundStatus.FAILED)
        return Annotation(RefundStatus.FAILED)
    return None


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str


class PaymentMismatch(StrEnum):
    """How a PagoExitoso differs from the order (the ``reason`` it is counted under)."""

    AMOUNT = "amount_mismatch"
    CURRENCY = "currency_mismatch"


def payment_mismatch(order: Money, paid: Money) -> PaymentMismatch | None:
    """None when ``paid`` is the order's total in its currency. Any other payment is not this
    order's: it must not move the order (``on_event`` is not asked), only be recorded and
    counted. Amounts compare as numbers; another currency is reported as such whatever the
    amount."""
    if paid.currency != order.currency:
        return PaymentMismatch.CURRENCY
    if paid.amount != order.amount:
        return PaymentMismatch.AMOUNT
    return None


class CannotCancel(Exception):
    def __init__(self, status: OrderStatus) -> None:
        super().__init__(f"saga is {status}: nothing to cancel")
        self.status = status


def on_cancel_requested(status: OrderStatus) -> Transition:
    if status in TERMINAL or status is S.PENDIENTE_REEMBOLSO:
        raise CannotCancel(status)
    return Transition(S.CANCELADA_POR_USUARIO, CancelReason.CANCELADA_POR_USUARIO)


class CannotRetry(Exception):
    def __init__(self, status: OrderStatus) -> None:
        super().__init__(f"saga is {status}: " + (
            "its step waits for another service's event, which pedidos cannot send: replay "
            "that service's dead letter if it gave up on it" if status in ACTIVE
            else "nothing to retry"))
        self.status = status


# The steps pedidos can drive again: those started by an event of its own. Validation is asked
# for by OrdenSolicitada; the payment by inventario's StockVerificado, the allocation by pagos'
# PagoExitoso and the refund by inventario's FalloAsignacion, which only their producers may
# write (docs/operations.md, "Retrying a step").
RETRYABLE = frozenset({S.PENDIENTE_VALIDACION})


def on_retry_requested(status: OrderStatus) -> Transition:
    """The step started again: the same status, a fresh step deadline."""
    if status not in RETRYABLE:
        raise CannotRetry(status)
    return Transition(status)


def on_step_deadline(status: OrderStatus) -> Transition | None:
    if status in _BEFORE_ALLOCATION:
        return Transition(S.CANCELADA_TIMEOUT, CancelReason.TIMEOUT)
    return None


def on_saga_deadline(status: OrderStatus) -> Transition | None:
    if status in ACTIVE:
        return Transition(S.TIMED_OUT, CancelReason.SAGA_EXPIRADA)
    return None


def final_status_label(status: OrderStatus) -> str:
    """The ``final_status`` label of saga_duration_seconds: success, compensated or failed."""
    if status is S.COMPLETADA:
        return "success"
    if status in (S.CANCELADA_CON_REEMBOLSO, S.CANCELADA_TIMEOUT, S.CANCELADA_POR_USUARIO,
                  S.TIMED_OUT):
        return "compensated"
    return "failed"
