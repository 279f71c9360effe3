"""Composition root of pedidos."""

from __future__ import annotations

from fastapi import FastAPI

from pedidos import metrics as pedidos_metrics
from pedidos.adapters.known_sagas import KnownSagas, OrderStores, cached_stores
from pedidos.adapters.order_queries import OrderQueries
from pedidos.adapters.tables import messaging
from pedidos.config import FingerprintKey, PaymentTokenSealing, PedidosSettings
from pedidos.domain.order import SAGA_TYPE
from pedidos.entrypoints.http import routes
from pedidos.entrypoints.jobs import deadline_job
from pedidos.entrypoints.messages import make_track_saga
from pedidos.entrypoints.schemas import OrderRequest
from pedidos.usecases.fingerprints import Fingerprints
from pedidos.usecases.track_saga import TRACKED_EVENTS, Tracked
from sagakit.consumer import Subscription
from sagakit.observability import metrics
from sagakit.observability.privacy import declare_model
from sagakit.runtime import PeriodicJob, Runtime, ServiceDefinition, create_app
from sagakit.settings import load

SERVICE = "pedidos"


async def saga_gauges(rt: Runtime) -> None:
    async with rt.engine.connect() as conn:
        active, worst = await OrderQueries(conn).active_stats()
    metrics.SAGAS_ACTIVE.labels(SAGA_TYPE).set(active)
    metrics.SAGA_DEADLINE_USED.labels(SAGA_TYPE).set(worst)


def subscriptions(settings: PedidosSettings, stores: OrderStores
                  ) -> list[Subscription[Tracked]]:
    track = make_track_saga(settings, stores)
    # Reads without a transaction; the commit statement is the transaction. Everything that
    # follows the commit waits in after_commit, so queued events may share one transaction.
    return [Subscription(model, track, reads_outside_transaction=True,
                         shares_transaction=True) for model in TRACKED_EVENTS]


def create() -> FastAPI:
    declare_model(OrderRequest)
    settings = load(PedidosSettings)
    # Read at start: a pedidos without its key would take orders it cannot pass on.
    sealer = load(PaymentTokenSealing).sealing_key()
    # Read at start too: without it no order's card or request could be fingerprinted.
    fingerprints = Fingerprints(load(FingerprintKey).key())
    # Every order store reads a saga this instance wrote last as its write returned it
    # (ADR 0005): one memory, shared by its consumer, its API and its deadlines.
    stores = cached_stores(KnownSagas())
    return create_app(ServiceDefinition(
        name=SERVICE,
        tables=messaging,
        subscriptions=lambda rt: subscriptions(settings, stores),
        routers=[routes(settings, stores, sealer, fingerprints)],
        saga_types=[SAGA_TYPE],
        metrics_at_zero=pedidos_metrics.initialise,
        jobs=[PeriodicJob("deadlines", settings.deadline_scan_interval_s,
                          deadline_job(settings, stores)),
              PeriodicJob("saga-gauges", 5.0, saga_gauges)],
        description="Orders and the state of their Check-Then-Pay saga.",
    ))
