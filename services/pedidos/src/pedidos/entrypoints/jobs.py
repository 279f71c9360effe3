"""What the runtime's periodic jobs call: the use cases, with their stores built on the
runtime's database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from pedidos.adapters.deadline_schedule import DeadlineSchedule
from pedidos.adapters.known_sagas import OrderStores
from pedidos.config import PedidosSettings
from pedidos.usecases.enforce_deadlines import enforce_deadlines
from pedidos.usecases.ports import OrderStore, OrderUnits
from sagakit.ports import UnitOfWorkPort
from sagakit.runtime import RunAgainIn, Runtime


def order_units(rt: Runtime, stores: OrderStores) -> OrderUnits:
    @asynccontextmanager
    async def unit() -> AsyncIterator[tuple[UnitOfWorkPort, OrderStore]]:
        async with rt.uow() as uow:
            yield uow, stores(uow)

    return unit


def deadline_job(settings: PedidosSettings, stores: OrderStores
                 ) -> Callable[[Runtime], Awaitable[RunAgainIn]]:
    async def run(rt: Runtime) -> RunAgainIn:
        return await enforce_deadlines(DeadlineSchedule(rt.engine), order_units(rt, stores),
                                       settings)

    return run
