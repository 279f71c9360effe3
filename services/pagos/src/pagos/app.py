"""Composition root of pagos."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from sagakit.consumer import Subscription
from sagakit.runtime import Runtime, ServiceDefinition, create_app
from sagakit.settings import load

from pagos.adapters.gateway_client import GatewayClient
from pagos.adapters.tables import messaging
from pagos.config import PagosSettings
from pagos.entrypoints.http import router
from pagos.usecases.compensate_payment import make_compensation_handlers
from pagos.usecases.gateway_worker import GatewayWorker
from pagos.usecases.start_charge import make_on_stock_verificado

SERVICE = "pagos"


def _worker(rt: Runtime) -> GatewayWorker:
    if "worker" not in rt.extras:
        settings = load(PagosSettings)
        rt.extras["worker"] = GatewayWorker(
            rt.uow, GatewayClient(settings.gateway_url, settings.gateway_timeout_s,
                                  settings.gateway_keep_alive_s), settings)
    return rt.extras["worker"]


def subscriptions(rt: Runtime) -> list[Subscription]:
    worker = _worker(rt)
    on_fallo_asignacion, on_orden_cancelada = make_compensation_handlers(worker.kick)
    return [
        Subscription("StockVerificado", make_on_stock_verificado(worker)),
        Subscription("FalloAsignacion", on_fallo_asignacion),
        Subscription("OrdenCancelada", on_orden_cancelada),
    ]


async def on_start(rt: Runtime) -> None:
    worker = _worker(rt)
    stop = asyncio.Event()
    rt.extras["worker_stop"] = stop
    if rt.service_settings.run_jobs:
        rt.extras["worker_task"] = asyncio.create_task(worker.run(stop), name="gateway-worker")


async def on_stop(rt: Runtime) -> None:
    rt.extras["worker_stop"].set()
    task = rt.extras.get("worker_task")
    if task is not None:
        await asyncio.wait({task}, timeout=10)
    await rt.extras["worker"].gateway.close()


def create() -> FastAPI:
    return create_app(ServiceDefinition(
        name=SERVICE,
        tables=messaging,
        subscriptions=subscriptions,
        routers=[router],
        compensation_reasons=["refund"],
        on_start=on_start,
        on_stop=on_stop,
        description="Charges after stock was verified; refunds on allocation failure or cancel.",
    ))
