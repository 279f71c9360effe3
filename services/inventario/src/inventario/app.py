"""Composition root of inventario."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from inventario import metrics
from inventario.adapters.tables import messaging
from inventario.config import InventarioSettings
from inventario.entrypoints.http import router
from inventario.entrypoints.jobs import reservation_expiry_job
from inventario.entrypoints.messages import (
    make_on_orden_solicitada,
    make_on_orden_solicitada_v4,
    make_on_pago_exitoso,
    on_orden_cancelada,
)
from saga_contracts.events.orders import OrdenCancelada, OrdenSolicitada, OrdenSolicitada_v4
from saga_contracts.events.payments import PagoExitoso
from saga_contracts.topology import SAGA_TYPE
from sagakit.consumer import Subscription
from sagakit.runtime import PeriodicJob, Runtime, ServiceDefinition, create_app
from sagakit.settings import load

SERVICE = "inventario"


def subscriptions(_: Runtime) -> list[Subscription[Any]]:
    settings = load(InventarioSettings)
    reads = settings.orden_solicitada_versions
    order_requests: list[Subscription[Any]] = []
    # The read runs outside any transaction (it takes no lock, and under READ COMMITTED a
    # read inside one would see no more than this) and the record of the check goes with
    # the commit statement: two round trips, where BEGIN, read, write, commit statement and
    # COMMIT took five. Nothing follows its commit: queued orders may be checked in one
    # transaction.
    # A reserving check's commit statement locks the lines' products: in a shared
    # transaction they stay locked until its COMMIT, bounded by the shared transaction's
    # lock timeout (sagakit.store.shared_transaction).
    # The same for either version of the order (INVENTARIO_READS_ORDEN_SOLICITADA); one
    # published in both is checked once (sagakit.twins).
    if "OrdenSolicitada" in reads:
        order_requests.append(Subscription(OrdenSolicitada, make_on_orden_solicitada(settings),
                                           reads_outside_transaction=True,
                                           shares_transaction=True))
    if "OrdenSolicitada_v4" in reads:
        order_requests.append(Subscription(OrdenSolicitada_v4,
                                           make_on_orden_solicitada_v4(settings),
                                           reads_outside_transaction=True,
                                           shares_transaction=True))
    return [
        *order_requests,
        # The read (without locks) and the guarded commit statement that takes the locks
        # (ADR 0005), in a transaction: its read gives the commit statement a statement
        # timeout above the lock timeout, which a statement that is its own transaction could
        # not be given without a round trip of its own before it (a statement's timeout is
        # fixed as it starts). BEGIN and COMMIT are the price of the lock timeout applying.
        Subscription(PagoExitoso, make_on_pago_exitoso(settings)),
        Subscription(OrdenCancelada, on_orden_cancelada),
    ]


def database_settings() -> dict[str, str]:
    """docs/standard.md#timeouts-of-each-service: a query of inventario may take this long (each
    statement of a saga step is its whole transaction, or nearly)."""
    settings = load(InventarioSettings)
    return {"statement_timeout": f"{int(settings.statement_timeout_s * 1000)}ms"}


def create() -> FastAPI:
    settings = load(InventarioSettings)
    return create_app(ServiceDefinition(
        name=SERVICE,
        tables=messaging,
        subscriptions=subscriptions,
        routers=[router],
        saga_types=[SAGA_TYPE],
        metrics_at_zero=metrics.initialise,
        description="Stock validation (no locks), allocation (row locks) and release.",
        database_settings=database_settings,
        # The reservations' durable timer: their deadlines, in their rows.
        jobs=[PeriodicJob("reservation-expiry", settings.reservation_expiry_interval_s,
                          reservation_expiry_job(settings))],
    ))
