"""The events pedidos emits about a saga, built from the saga as it was read.

Some fields are read as plain text (the currency a row keeps, a status's or a step's name) where
the model names the values its schema allows: the model checks each one when it is built, and
refuses, before anything is written, one its schema would refuse.
"""

from __future__ import annotations

from typing import cast

from pedidos.domain.order import CancelReason, OrderStatus
from pedidos.usecases.ports import SagaState
from saga_contracts.events.fields import Currency
from saga_contracts.events.orders import (
    CancellationReason,
    OrdenCancelada,
    OrdenCompletada,
    SagaExpirada,
    StepTimedOut,
    TimedOutStep,
)


def orden_completada(saga: SagaState) -> OrdenCompletada:
    return OrdenCompletada(order_id=saga.order_id, total_amount=saga.total_amount,
                           currency=cast(Currency, saga.currency))


def orden_cancelada(saga: SagaState, status: OrderStatus,
                    reason: CancelReason) -> OrdenCancelada:
    return OrdenCancelada(order_id=saga.order_id, status=status.value,
                          reason=cast(CancellationReason, reason.value))


def saga_expirada(saga: SagaState) -> SagaExpirada:
    return SagaExpirada(order_id=saga.order_id, previous_status=saga.status.value,
                        elapsed_ms=int(saga.elapsed_s * 1000))


def step_timed_out(saga: SagaState, step: str) -> StepTimedOut:
    return StepTimedOut(order_id=saga.order_id, step=cast(TimedOutStep, step),
                        elapsed_ms=saga.step_elapsed_ms)
