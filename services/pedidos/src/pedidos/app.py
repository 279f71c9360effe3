"""Composition root of pedidos."""

from __future__ import annotations

from fastapi import FastAPI
from sagakit.consumer import Subscription
from sagakit.observability import metrics
from sagakit.observability.privacy import declare_model
from sagakit.runtime import PeriodicJob, Runtime, ServiceDefinition, create_app
from sagakit.settings import load

from pedidos.adapters.known_sagas import known_sagas_of
from pedidos.adapters.order_repository import SAGA_TYPE, OrderRepository
from pedidos.adapters.tables import messaging
from pedidos.config import PedidosSettings
from pedidos.domain.order import CancelReason
from pedidos.entrypoints.http import router
from pedidos.entrypoints.schemas import OrderRequest
from pedidos.usecases.enforce_deadlines import enforce_deadlines
from pedidos.usecases.track_saga import TRACKED_EVENTS, make_track_saga

SERVICE = "pedidos"


async def saga_gauges(rt: Runtime) -> None:
    async with rt.engine.connect() as conn:
        active, worst = await OrderRepository(conn).active_stats()
    metrics.SAGAS_ACTIVE.labels(SAGA_TYPE).set(active)
    metrics.SAGA_DEADLINE_USED.labels(SAGA_TYPE).set(worst)


def _settings(rt: Runtime) -> PedidosSettings:
    if "settings" not in rt.extras:
        rt.extras["settings"] = load(PedidosSettings)
    return rt.extras["settings"]


def subscriptions(rt: Runtime) -> list[Subscription]:
    track = make_track_saga(_settings(rt), known_sagas_of(rt.extras))
    # Reads without a transaction; the commit statement is the transaction. Everything that
    # follows the commit waits in after_commit, so queued events may share one transaction.
    return [Subscription(event_type, track, reads_outside_transaction=True,
                         shares_transaction=True) for event_type in TRACKED_EVENTS]


async def on_start(rt: Runtime) -> None:
    _settings(rt)


def create() -> FastAPI:
    declare_model(OrderRequest)
    settings = load(PedidosSettings)
    return create_app(ServiceDefinition(
        name=SERVICE,
        tables=messaging,
        subscriptions=subscriptions,
        routers=[router],
        compensation_reasons=[r.value for r in CancelReason],
        jobs=[PeriodicJob("deadlines", settings.deadline_scan_interval_s,
                          lambda rt: enforce_deadlines(rt, _settings(rt))),
              PeriodicJob("saga-gauges", 5.0, saga_gauges)],
        on_start=on_start,
        description="Orders and the state of their Check-Then-Pay saga.",
    ))
