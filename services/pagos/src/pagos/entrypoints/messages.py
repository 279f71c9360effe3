"""pagos' event handlers as the consumer calls them, with a unit of work and the event: each
puts the payment repository on its unit of work and hands both to its use case."""

from __future__ import annotations

from collections.abc import Callable

from pagos.adapters.payment_repository import PaymentRepository
from pagos.usecases.compensate_payment import (
    compensate_allocation_failure,
    compensate_order_cancellation,
)
from pagos.usecases.ports import ChargeCalls
from pagos.usecases.record_allocation import record_allocation
from pagos.usecases.start_charge import start_charge
from saga_contracts.events.inventory import FalloAsignacion, StockAsignado, StockVerificado
from saga_contracts.events.orders import OrdenCancelada
from sagakit.consumer import Handler
from sagakit.message import Message
from sagakit.store import UnitOfWork


def make_on_stock_verificado(calls: ChargeCalls) -> Handler[StockVerificado]:
    async def on_stock_verificado(uow: UnitOfWork, event: Message[StockVerificado]) -> None:
        await start_charge(uow, PaymentRepository(uow), calls, event)

    return on_stock_verificado


async def on_stock_asignado(uow: UnitOfWork, event: Message[StockAsignado]) -> None:
    await record_allocation(uow, PaymentRepository(uow), event)


def make_compensation_handlers(kick: Callable[[], None]
                               ) -> tuple[Handler[FalloAsignacion], Handler[OrdenCancelada]]:
    """FalloAsignacion's and OrdenCancelada's; ``kick`` wakes the gateway worker for the
    refund or resolution they make due."""

    async def on_fallo_asignacion(uow: UnitOfWork, event: Message[FalloAsignacion]) -> None:
        await compensate_allocation_failure(uow, PaymentRepository(uow), kick, event)

    async def on_orden_cancelada(uow: UnitOfWork, event: Message[OrdenCancelada]) -> None:
        await compensate_order_cancellation(uow, PaymentRepository(uow), kick, event)

    return on_fallo_asignacion, on_orden_cancelada
