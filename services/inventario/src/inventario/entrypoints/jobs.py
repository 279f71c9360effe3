"""inventario's periodic jobs, run by the instances that run jobs (``RUN_JOBS``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from inventario.adapters.reservation_deadlines import ReservationDeadlineStore
from inventario.config import InventarioSettings
from inventario.usecases.expire_reservations import expire_reservations
from sagakit.runtime import RunAgainIn, Runtime


def reservation_expiry_job(settings: InventarioSettings
                           ) -> Callable[[Runtime], Awaitable[RunAgainIn]]:
    async def run(rt: Runtime) -> RunAgainIn:
        store = ReservationDeadlineStore(rt.engine, rt.tables.schema)
        return RunAgainIn(await expire_reservations(
            store, interval_s=settings.reservation_expiry_interval_s))
    return run
