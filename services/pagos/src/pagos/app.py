"""Composition root of pagos."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI

from pagos import metrics
from pagos.adapters.gateway_client import GatewayClient
from pagos.adapters.payment_repository import payment_units
from pagos.adapters.resolutions import payments_needing_a_person
from pagos.adapters.tables import messaging
from pagos.config import GatewaySecretKey, PagosSettings, PaymentTokenKeys
from pagos.entrypoints.http import router
from pagos.entrypoints.messages import (
    make_compensation_handlers,
    make_on_stock_verificado,
    on_stock_asignado,
)
from pagos.usecases.gateway_worker import GatewayWorker
from pagos.usecases.ports import PaymentTokenOpener
from saga_contracts.events.inventory import FalloAsignacion, StockAsignado, StockVerificado
from saga_contracts.events.orders import OrdenCancelada
from saga_contracts.sealing import Binding, SealingError
from saga_contracts.topology import SAGA_TYPE
from sagakit.consumer import Subscription
from sagakit.runtime import PeriodicJob, Runtime, ServiceDefinition, ServiceSettings, create_app
from sagakit.settings import load

SERVICE = "pagos"


class NoGatewayCredentials:
    """What an instance that runs no gateway worker has instead of the token's opening keys and
    the gateway's secret key: nothing. Its consumer's handlers create work for whichever
    worker claims it (``GatewayWorker.reserve`` gives no slot to an instance that runs none),
    so nothing here is ever asked; if it were, it would open no token."""

    def open(self, sealed: str, charge: Binding) -> str:
        raise SealingError("this instance runs no gateway worker and holds no opening key")


class GatewayWorkerRun:
    """The instance's gateway worker: built once with the runtime (the handlers hand it new
    work), run while the instance runs if the instance runs jobs, and stopped with it.

    Only an instance that runs it holds the payment token's opening keys and the gateway's
    secret key (``credentials`` None otherwise): the API instances, which serve
    ``GET /payments`` to the internet, never load them, so that a file read there opens no
    token and charges nothing."""

    def __init__(self, credentials: tuple[PaymentTokenOpener, str] | None) -> None:
        self._tokens: PaymentTokenOpener = (credentials[0] if credentials
                                            else NoGatewayCredentials())
        self._gateway_secret_key = credentials[1] if credentials else ""
        self._worker: GatewayWorker | None = None
        self._gateway: GatewayClient | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def worker(self, rt: Runtime) -> GatewayWorker:
        if self._worker is None:
            settings = load(PagosSettings)
            self._gateway = GatewayClient(settings.gateway_url,
                                          secret_key=self._gateway_secret_key,
                                          timeout_s=settings.gateway_timeout_s,
                                          keep_alive_s=settings.gateway_keep_alive_s)
            self._worker = GatewayWorker(payment_units(rt.uow), self._gateway, settings,
                                         self._tokens)
        return self._worker

    async def start(self, rt: Runtime) -> None:
        worker = self.worker(rt)
        self._stop = asyncio.Event()
        if rt.service_settings.run_jobs:
            self._task = asyncio.create_task(worker.run(self._stop), name="gateway-worker")

    async def stop(self, rt: Runtime) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=10)
        if self._gateway is not None:
            await self._gateway.close()


def subscriptions(worker: GatewayWorker) -> list[Subscription[Any]]:
    on_fallo_asignacion, on_orden_cancelada = make_compensation_handlers(worker.kick)
    return [
        Subscription(StockVerificado, make_on_stock_verificado(worker)),
        # Takes no lock: it reads, then writes with its commit statement, guarded by what it
        # read (pagos.usecases.record_allocation). Every completed saga sends one.
        Subscription(StockAsignado, on_stock_asignado, reads_outside_transaction=True),
        Subscription(FalloAsignacion, on_fallo_asignacion),
        Subscription(OrdenCancelada, on_orden_cancelada),
    ]


async def payment_gauges(rt: Runtime) -> None:
    async with rt.engine.connect() as conn:
        metrics.PAYMENTS_NEEDING_A_PERSON.labels(SERVICE).set(
            await payments_needing_a_person(conn))


def gateway_credentials() -> tuple[PaymentTokenOpener, str] | None:
    """The opening keys and the gateway's secret key, read at start by an instance that runs
    the gateway worker (a worker without them could open no token and make no call: it stops
    with a message naming the variable); None for any other, which never reads them."""
    if not load(ServiceSettings).run_jobs:
        return None
    return load(PaymentTokenKeys).opening_keys(), load(GatewaySecretKey).secret_key()


def create() -> FastAPI:
    gateway_worker = GatewayWorkerRun(gateway_credentials())
    return create_app(ServiceDefinition(
        name=SERVICE,
        tables=messaging,
        subscriptions=lambda rt: subscriptions(gateway_worker.worker(rt)),
        routers=[router],
        saga_types=[SAGA_TYPE],
        metrics_at_zero=metrics.initialise,
        on_start=gateway_worker.start,
        on_stop=gateway_worker.stop,
        jobs=[PeriodicJob("payment-gauges", 5.0, payment_gauges)],
        description="Charges after stock was verified; refunds on allocation failure or cancel "
                    "(not once the stock was allocated).",
    ))
