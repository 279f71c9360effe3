"""inventario's message handlers: each builds the store on its unit of work and runs its use case.

The unit of work is the consumer's (sagakit.consumer), which claims the message in its inbox and
takes each handler's options from its ``Subscription`` in ``inventario.app``.
"""

from __future__ import annotations

from inventario.adapters.stock_repository import StockRepository
from inventario.config import InventarioSettings
from inventario.usecases.allocate_stock import allocate_stock
from inventario.usecases.release_stock import release_stock
from inventario.usecases.validate_stock import (
    ReservationPolicy,
    ValidationPolicy,
    validate_stock,
)
from saga_contracts.events.orders import OrdenCancelada, OrdenSolicitada, OrdenSolicitada_v4
from saga_contracts.events.payments import PagoExitoso
from sagakit.consumer import Handler
from sagakit.message import Message
from sagakit.store import UnitOfWork


def _validation_policy(settings: InventarioSettings) -> ValidationPolicy:
    return ValidationPolicy(ReservationPolicy(ttl_s=settings.reservation_ttl_s,
                                              auto_ratio=settings.auto_reserve_ratio),
                            price_refusal_versions=tuple(settings.precio_rechazado_versions))


def make_on_orden_solicitada(settings: InventarioSettings) -> Handler[OrdenSolicitada]:
    policy = _validation_policy(settings)

    async def on_orden_solicitada(uow: UnitOfWork, event: Message[OrdenSolicitada]) -> None:
        await validate_stock(uow, StockRepository(uow), event, policy)

    return on_orden_solicitada


def make_on_orden_solicitada_v4(settings: InventarioSettings) -> Handler[OrdenSolicitada_v4]:
    """The same check: the stock check reads the order's lines, currency and payment method,
    which both versions carry alike; the address it does not read."""
    policy = _validation_policy(settings)

    async def on_orden_solicitada_v4(uow: UnitOfWork,
                                     event: Message[OrdenSolicitada_v4]) -> None:
        await validate_stock(uow, StockRepository(uow), event, policy)

    return on_orden_solicitada_v4


def make_on_pago_exitoso(settings: InventarioSettings) -> Handler[PagoExitoso]:
    lock_timeout_ms = int(settings.lock_timeout_s * 1000)
    statement_timeout_ms = int(settings.allocation_statement_timeout_s * 1000)

    async def on_pago_exitoso(uow: UnitOfWork, event: Message[PagoExitoso]) -> None:
        await allocate_stock(uow, StockRepository(uow), event, lock_timeout_ms=lock_timeout_ms,
                             statement_timeout_ms=statement_timeout_ms)

    return on_pago_exitoso


async def on_orden_cancelada(uow: UnitOfWork, event: Message[OrdenCancelada]) -> None:
    await release_stock(uow, StockRepository(uow), event)
