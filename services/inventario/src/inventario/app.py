"""Composition root of inventario."""

from __future__ import annotations

from fastapi import FastAPI
from saga_contracts.registry import latest
from saga_contracts.topics import ORDER_EVENTS, PAYMENT_EVENTS
from sagakit.consumer import Handler
from sagakit.runtime import Runtime, ServiceDefinition, create_app
from sagakit.settings import load

from inventario.adapters.tables import messaging
from inventario.config import InventarioSettings
from inventario.entrypoints.http import router
from inventario.entrypoints.messages import (
    make_on_pago_exitoso,
    on_orden_cancelada,
    on_orden_solicitada,
)

SERVICE = "inventario"


def handlers(_: Runtime) -> dict[str, Handler]:
    return {
        "OrdenSolicitada": on_orden_solicitada,
        "PagoExitoso": make_on_pago_exitoso(load(InventarioSettings)),
        "OrdenCancelada": on_orden_cancelada,
    }


def database_settings() -> dict[str, str]:
    """Part II §5.4: a query of inventario may take this long (each statement of a saga step
    is its whole transaction, or nearly)."""
    settings = load(InventarioSettings)
    return {"statement_timeout": f"{int(settings.statement_timeout_s * 1000)}ms"}


def create() -> FastAPI:
    return create_app(ServiceDefinition(
        name=SERVICE,
        tables=messaging,
        topics=[ORDER_EVENTS, PAYMENT_EVENTS],
        make_handlers=handlers,
        routers=[router],
        # inventario releases stock for whatever reason the order was cancelled.
        compensation_reasons=latest("OrdenCancelada").document["properties"]["reason"]["enum"],
        description="Stock validation (no locks), allocation (row locks) and release.",
        database_settings=database_settings,
    ))
