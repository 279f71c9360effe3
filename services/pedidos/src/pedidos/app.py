"""Composition root of pedidos."""

from __future__ import annotations

from fastapi import FastAPI
from saga_contracts.topics import INVENTORY_EVENTS, PAYMENT_EVENTS
from sagakit import metrics
from sagakit.consumer import Handler
from sagakit.privacy import declare_model
from sagakit.runtime import PeriodicJob, Runtime, ServiceDefinition, create_app
from sagakit.settings import load

from pedidos.adapters.order_queries import OrderQueries
from pedidos.adapters.tables import messaging
from pedidos.config import PedidosSettings
from pedidos.domain.order import SAGA_TYPE, CancelReason
from pedidos.entrypoints.http import routes
from pedidos.entrypoints.jobs import deadline_job
from pedidos.entrypoints.messages import make_track_saga
from pedidos.entrypoints.schemas import OrderRequest
from pedidos.usecases.known_sagas import KnownSagas
from pedidos.usecases.track_saga import TRACKED_EVENTS

SERVICE = "pedidos"


async def saga_gauges(rt: Runtime) -> None:
    async with rt.engine.connect() as conn:
        active, worst = await OrderQueries(conn).active_stats()
    metrics.SAGAS_ACTIVE.labels(SAGA_TYPE).set(active)
    metrics.SAGA_DEADLINE_USED.labels(SAGA_TYPE).set(worst)


def handlers(settings: PedidosSettings, known: KnownSagas) -> dict[str, Handler]:
    track = make_track_saga(settings, known)
    return dict.fromkeys(TRACKED_EVENTS, track)


def create() -> FastAPI:
    declare_model(OrderRequest)
    settings = load(PedidosSettings)
    # The sagas this instance wrote last, shared by its consumer, its API and its deadlines.
    known = KnownSagas()
    return create_app(ServiceDefinition(
        name=SERVICE,
        tables=messaging,
        topics=[INVENTORY_EVENTS, PAYMENT_EVENTS],
        make_handlers=lambda rt: handlers(settings, known),
        routers=[routes(settings, known)],
        compensation_reasons=[r.value for r in CancelReason],
        jobs=[PeriodicJob("deadlines", settings.deadline_scan_interval_s,
                          deadline_job(settings, known)),
              PeriodicJob("saga-gauges", 5.0, saga_gauges)],
        description="Orders and the state of their Check-Then-Pay saga.",
    ))
