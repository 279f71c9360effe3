"""The peer's front door: ``POST /orders`` with pedidos' request model and bearer-token check,
answering 202 once the workflow is started (or enqueued) under the order's id.

The order id is the workflow id: with an ``Idempotency-Key`` it is derived from the customer
and the key, so the same order posted twice finds the workflow of the first and starts none.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

import anyio.to_thread
from dbos import DBOS, DBOSClient, EnqueueOptions, SetWorkflowID
from fastapi import FastAPI, Header, HTTPException, Response, Security
from fastapi.responses import JSONResponse

from pedidos.entrypoints.schemas import CUSTOMER_ID, NO_NUL, OrderAccepted, OrderRequest
from peer_dbos.runtime import APP_VERSION, launch, launch_registered, system_url
from peer_dbos.settings import QUEUE, WORKFLOW, PeerSettings
from sagakit.auth import CUSTOMER, AuthSettings, Principal, TokenVerifier, install_authentication, require
from sagakit.settings import load

Customer = Annotated[Principal, Security(require(CUSTOMER))]
# Idempotency keys are scoped to the customer: the same key of two customers is two orders.
_ORDERS = uuid.UUID("6f1c8a52-3d0e-4b7e-9a41-0c5d2e7b9f13")

Starter = Callable[[str, dict[str, Any]], None]
AsyncStarter = Callable[[str, dict[str, Any]], Coroutine[Any, Any, None]]


def order_id_for(customer: str, idempotency_key: str | None) -> str:
    if idempotency_key is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_ORDERS, f"{customer}\x00{idempotency_key}"))


IdempotencyKey = Annotated[str | None, Header(min_length=1, max_length=255, pattern=NO_NUL)]


def _refusal(body: OrderRequest, customer: Principal) -> JSONResponse | None:
    """pedidos' checks of the caller against the body."""
    if not re.fullmatch(CUSTOMER_ID, customer.subject):
        raise HTTPException(403, detail="this token's subject cannot be a customer id")
    if body.customer_id is not None and body.customer_id != customer.subject:
        return JSONResponse(status_code=422, content={"detail": [{
            "loc": ["body", "customer_id"], "type": "customer_mismatch",
            "msg": "customer_id is not the customer the token names"}]})
    return None


def _accepted(order_id: str, response: Response) -> OrderAccepted:
    response.headers["Location"] = f"/orders/{order_id}"
    return OrderAccepted(order_id=order_id, saga_id=order_id, status="PENDIENTE_VALIDACION")


def _app(starter: Starter | AsyncStarter, settings: PeerSettings,
         lifespan: Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]],
         *, asynchronous: bool = False) -> FastAPI:
    app = FastAPI(title="Check-Then-Pay on DBOS (benchmark peer)", lifespan=lifespan)
    install_authentication(app, TokenVerifier(load(AuthSettings)))

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    if asynchronous:
        @app.post("/orders", status_code=202, response_model=OrderAccepted)
        async def create_order_async(body: OrderRequest, response: Response,
                                     customer: Customer, idempotency_key: IdempotencyKey = None
                                     ) -> OrderAccepted | JSONResponse:
            refused = _refusal(body, customer)
            if refused is not None:
                return refused
            order_id = order_id_for(customer.subject, idempotency_key)
            await starter(order_id, body.wire(customer.subject))  # type: ignore[misc]
            return _accepted(order_id, response)
        return app

    # A plain function: FastAPI runs it on a worker thread, as DBOS's synchronous API wants.
    @app.post("/orders", status_code=202, response_model=OrderAccepted)
    def create_order(body: OrderRequest, response: Response, customer: Customer,
                     idempotency_key: IdempotencyKey = None) -> OrderAccepted | JSONResponse:
        refused = _refusal(body, customer)
        if refused is not None:
            return refused
        order_id = order_id_for(customer.subject, idempotency_key)
        starter(order_id, body.wire(customer.subject))
        return _accepted(order_id, response)

    return app


def _threads(settings: PeerSettings) -> None:
    # Starlette's worker threads (40 by default) run the handler; as many as DBOS's executor.
    anyio.to_thread.current_default_thread_limiter().total_tokens = settings.executor_threads


def inline_app() -> FastAPI:
    """One process that serves the API and runs the workflows (DBOS's natural shape)."""
    settings = load(PeerSettings)
    if settings.style == "async":
        return _inline_async_app(settings)
    workflow: list[Callable[[dict[str, Any]], str]] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        _threads(settings)
        workflow.append(launch(settings))
        yield
        DBOS.destroy()

    def start(order_id: str, order: dict[str, Any]) -> None:
        # An id already in use returns the running (or finished) workflow: started once.
        with SetWorkflowID(order_id):
            DBOS.start_workflow(workflow[0], order)

    return _app(start, settings, lifespan)


def queue_app() -> FastAPI:
    """The API process of the queue shape: it enqueues, a worker process dequeues."""
    settings = load(PeerSettings)
    client: dict[str, DBOSClient] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        _threads(settings)
        client["dbos"] = DBOSClient(system_database_url=system_url(settings),
                                    dbos_system_schema=settings.system_schema,
                                    system_database_pool_size=settings.system_pool_size)
        yield
        client["dbos"].destroy()

    def enqueue(order_id: str, order: dict[str, Any]) -> None:
        options: EnqueueOptions = {"workflow_name": WORKFLOW, "queue_name": QUEUE,
                                   "workflow_id": order_id, "app_version": APP_VERSION}
        client["dbos"].enqueue(options, order)

    return _app(enqueue, settings, lifespan)


def _inline_async_app(settings: PeerSettings) -> FastAPI:
    """The same in DBOS's async style: the handler starts the workflow on the event loop."""
    from peer_dbos.saga_async import Workflow, register_async

    workflow: list[Workflow] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        workflow.append(await register_async(settings))
        launch_registered(settings)
        yield
        DBOS.destroy()

    async def start(order_id: str, order: dict[str, Any]) -> None:
        with SetWorkflowID(order_id):
            await DBOS.start_workflow_async(workflow[0], order)

    return _app(start, settings, lifespan, asynchronous=True)
