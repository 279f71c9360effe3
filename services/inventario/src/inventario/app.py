"""Composition root of inventario."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from inventario.adapters.tables import messaging
from inventario.config import InventarioSettings
from inventario.domain.payment_match import PaymentMismatch
from inventario.entrypoints.http import router
from inventario.entrypoints.jobs import reservation_expiry_job
from inventario.entrypoints.messages import (
    make_on_orden_solicitada,
    make_on_pago_exitoso,
    on_orden_cancelada,
)
from saga_contracts.events.orders import OrdenCancelada, OrdenSolicitada
from saga_contracts.events.payments import PagoExitoso
from saga_contracts.registry import latest
from sagakit.consumer import Subscription
from sagakit.runtime import PeriodicJob, Runtime, ServiceDefinition, create_app
from sagakit.settings import load

SERVICE = "inventario"


def subscriptions(_: Runtime) -> list[Subscription[Any]]:
    settings = load(InventarioSettings)
    return [
        # The read runs outside any transaction (it takes no lock, and under READ COMMITTED a
        # read inside one would see no more than this) and the record of the check goes with
        # the commit statement: two round trips, where BEGIN, read, write, commit statement and
        # COMMIT took five. Nothing follows its commit: queued orders may be checked in one
        # transaction.
        # A reserving check's commit statement locks the lines' products: in a shared
        # transaction they stay locked until its COMMIT, bounded by the shared transaction's
        # lock timeout (sagakit.store.shared_transaction).
        Subscription(OrdenSolicitada, make_on_orden_solicitada(settings),
                     reads_outside_transaction=True, shares_transaction=True),
        # The read (without locks) and the guarded commit statement that takes the locks
        # (ADR 0005), in a transaction: its read gives the commit statement a statement
        # timeout above the lock timeout, which a statement that is its own transaction could
        # not be given without a round trip of its own before it (a statement's timeout is
        # fixed as it starts). BEGIN and COMMIT are the price of the lock timeout applying.
        Subscription(PagoExitoso, make_on_pago_exitoso(settings)),
        Subscription(OrdenCancelada, on_orden_cancelada),
    ]


def database_settings() -> dict[str, str]:
    """Part II §5.4: a query of inventario may take this long (each statement of a saga step
    is its whole transaction, or nearly)."""
    settings = load(InventarioSettings)
    return {"statement_timeout": f"{int(settings.statement_timeout_s * 1000)}ms"}


def create() -> FastAPI:
    settings = load(InventarioSettings)
    return create_app(ServiceDefinition(
        name=SERVICE,
        tables=messaging,
        subscriptions=subscriptions,
        routers=[router],
        # inventario releases stock for whatever reason the order was cancelled.
        compensation_reasons=latest("OrdenCancelada").document["properties"]["reason"]["enum"],
        payment_mismatch_reasons=[reason.value for reason in PaymentMismatch],
        description="Stock validation (no locks), allocation (row locks) and release.",
        database_settings=database_settings,
        # The reservations' durable timer: their deadlines, in their rows.
        jobs=[PeriodicJob("reservation-expiry", settings.reservation_expiry_interval_s,
                          reservation_expiry_job(settings))],
    ))
