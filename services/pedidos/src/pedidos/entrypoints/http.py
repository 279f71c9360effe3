"""pedidos' HTTP API: place orders, read them, and query or cancel their saga.

Every route takes a bearer token (sagakit.auth). Customers place orders (the token's subject is
the customer) and see and cancel their own; another customer's order or saga answers 404, as
one that does not exist. Operators see and cancel any (saying why), retry a saga's step, and
place none; each operator action is audited with it (``pedidos.operator_actions``).
"""

from __future__ import annotations

import logging
import math
import re
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Request, Response, Security
from fastapi.responses import JSONResponse

from pedidos.adapters.known_sagas import OrderStores
from pedidos.adapters.order_queries import OrderQueries
from pedidos.config import PedidosSettings
from pedidos.domain.order import TERMINAL, CannotCancel, CannotRetry, OrderStatus
from pedidos.entrypoints.schemas import (
    CUSTOMER_ID,
    NO_NUL,
    CancelRequest,
    HistoryEntry,
    OperatorActionEntry,
    OrderAccepted,
    OrderRequest,
    OrderView,
    RetryRequest,
    SagaHistoryView,
    SagaStatusView,
)
from pedidos.usecases.cancel_saga import SAGA_CANCELLED, SagaNotFound, cancel_saga
from pedidos.usecases.decline_velocity import OrderRefused
from pedidos.usecases.fingerprints import Fingerprints
from pedidos.usecases.place_order import IdempotencyKeyReused, PlacedOrder, place_order
from pedidos.usecases.ports import OperatorAction, PaymentTokenSealer
from pedidos.usecases.retry_step import STEP_RETRIED, RequestGone, retry_step
from saga_contracts import registry
from sagakit.auth import AUTH_RESPONSES, CUSTOMER, OPERATOR, Principal, require
from sagakit.envelope import new_span_id
from sagakit.observability import tracing
from sagakit.runtime import RateLimiter, runtime_of
from sagakit.store import retry_on_conflict

log = logging.getLogger("pedidos.http")

Customer = Annotated[Principal, Security(require(CUSTOMER))]
CustomerOrOperator = Annotated[Principal, Security(require(CUSTOMER, OPERATOR))]
Operator = Annotated[Principal, Security(require(OPERATOR))]

_NOT_YOURS: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such object, or another customer's"}}


def _refused(loc: list[str], type_: str, msg: str) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": [
        {"loc": loc, "type": type_, "msg": msg}]})


def routes(settings: PedidosSettings, stores: OrderStores, sealer: PaymentTokenSealer,
           fingerprints: Fingerprints) -> APIRouter:
    """The API, its commands deciding with ``settings`` on the order store ``stores`` puts on
    each unit of work; an order's payment token is sealed for pagos with ``sealer``, and known
    again (its card, its request) by its keyed ``fingerprints``."""
    router = APIRouter()
    # Each customer's orders: every one costs a saga and a charge at the gateway.
    orders_of = RateLimiter(settings.order_rate_per_customer, settings.order_burst_per_customer)

    @router.post("/orders", status_code=202, response_model=OrderAccepted, tags=["orders"],
                 responses={**AUTH_RESPONSES, 422: {
                     "description": "Invalid body, a body customer_id that is not the token's "
                                    "subject, or Idempotency-Key reused with another body"},
                     429: {"description": "This customer placed orders faster than "
                                          "PEDIDOS_ORDER_RATE_PER_CUSTOMER allows, or this "
                                          "customer or this card had too many payments "
                                          "declined lately (PEDIDOS_DECLINES_PER_CUSTOMER, "
                                          "PEDIDOS_DECLINES_PER_CARD) or has too many orders "
                                          "waiting for their payment "
                                          "(PEDIDOS_WAITING_ORDERS_PER_CUSTOMER, "
                                          "PEDIDOS_WAITING_ORDERS_PER_CARD); see "
                                          "Retry-After"}})
    async def create_order(body: OrderRequest, request: Request, response: Response,
                           customer: Customer,
                           idempotency_key: Annotated[str | None, Header(
                               min_length=1, max_length=255, pattern=NO_NUL)] = None
                           ) -> OrderAccepted | JSONResponse:
        rt = runtime_of(request)
        if not re.fullmatch(CUSTOMER_ID, customer.subject):
            raise HTTPException(403, detail="this token's subject cannot be a customer id")
        wait = orders_of.take(customer.subject)
        if wait:
            raise HTTPException(429, detail="too many orders from this customer: try again "
                                "after Retry-After seconds",
                                headers={"Retry-After": str(math.ceil(wait))})
        if body.customer_id is not None and body.customer_id != customer.subject:
            return _refused(["body", "customer_id"], "customer_mismatch",
                            "customer_id is not the customer the token names")
        wire = body.wire(customer.subject)
        # This request is the saga's first span (docs/standard.md#saga-and-span-ids): the parent
        # of OrdenSolicitada. It is one of the standard's span ids, like every message's, not
        # OpenTelemetry's, which exists only when tracing exports; the request's log line below
        # names it, and so does its OpenTelemetry span when there is one.
        span_id = new_span_id()
        tracing.annotate_current_span(span_id=span_id)

        async def attempt() -> PlacedOrder:
            async with rt.uow() as uow:
                return await place_order(uow, stores(uow), wire, body.computed_total,
                                         idempotency_key, settings, sealer=sealer,
                                         fingerprints=fingerprints, request_span_id=span_id)

        try:
            placed = await retry_on_conflict(attempt, what="place order")
        except IdempotencyKeyReused:
            return _refused(["header", "Idempotency-Key"], "idempotency_key_reused",
                            "this Idempotency-Key was used with a different request body")
        except OrderRefused as refused:
            # Card testing: refused before the order exists, so no charge tries the next card
            # (pedidos.usecases.decline_velocity).
            raise HTTPException(429, detail=refused.detail, headers={
                "Retry-After": str(refused.retry_after_s)}) from None
        # The request is logged whole: the declared sensitive fields (token, address) are masked
        # or dropped by the log pipeline, not by this call.
        log.info("order %s", "accepted" if placed.created else "replayed by Idempotency-Key",
                 extra={"saga_id": placed.saga_id, "event_type": "OrdenSolicitada",
                        "schema_version": registry.latest("OrdenSolicitada").version,
                        "status": "SUCCESS",
                        "order_id": placed.order_id, "span_id": span_id,
                        "parent_span_id": None, "order": wire})
        response.headers["Location"] = f"/orders/{placed.order_id}"
        return OrderAccepted(order_id=placed.order_id, saga_id=placed.saga_id,
                             status=placed.status)

    @router.get("/orders/{order_id}", response_model=OrderView, tags=["orders"],
                responses={**AUTH_RESPONSES, **_NOT_YOURS})
    async def get_order(order_id: uuid.UUID, request: Request,
                        caller: CustomerOrOperator) -> OrderView:
        async with runtime_of(request).engine.connect() as conn:
            order = await OrderQueries(conn).order(order_id, caller.owner_filter())
        if order is None:
            raise HTTPException(404, detail=f"order {order_id} not found")
        return OrderView(
            order_id=str(order["order_id"]), saga_id=str(order["saga_id"]),
            customer_id=order["customer_id"], status=order["status"],
            terminal=OrderStatus(order["status"]) in TERMINAL, items=order["items"],
            total_amount=f"{order['total_amount']:.2f}", currency=order["currency"],
            charge_id=order["charge_id"], refund_status=order["refund_status"],
            cancel_reason=order["cancel_reason"], created_at=order["created_at"],
            updated_at=order["updated_at"])

    @router.get("/sagas/{saga_id}/status", response_model=SagaStatusView, tags=["sagas"],
                responses={**AUTH_RESPONSES, **_NOT_YOURS})
    async def saga_status(saga_id: uuid.UUID, request: Request,
                          caller: CustomerOrOperator) -> SagaStatusView:
        async with runtime_of(request).engine.connect() as conn:
            saga = await OrderQueries(conn).saga(saga_id, caller.owner_filter())
        if saga is None:
            raise HTTPException(404, detail=f"saga {saga_id} not found")
        return SagaStatusView(
            saga_id=str(saga["saga_id"]), saga_type=saga["saga_type"],
            order_id=str(saga["order_id"]), status=saga["status"],
            terminal=OrderStatus(saga["status"]) in TERMINAL,
            current_step=saga["current_step"],
            owner=saga["owner"], started_at=saga["started_at"], updated_at=saga["updated_at"],
            step_deadline_at=saga["step_deadline_at"], expires_at=saga["expires_at"],
            finished_at=saga["finished_at"],
            trace_id=_trace_id((saga.get("context") or {}).get("traceparent")))

    @router.get("/sagas/{saga_id}/history", response_model=SagaHistoryView, tags=["sagas"],
                responses={**AUTH_RESPONSES, **_NOT_YOURS})
    async def saga_history(saga_id: uuid.UUID, request: Request,
                           caller: CustomerOrOperator) -> SagaHistoryView:
        async with runtime_of(request).engine.connect() as conn:
            repo = OrderQueries(conn)
            if await repo.saga(saga_id, caller.owner_filter()) is None:
                raise HTTPException(404, detail=f"saga {saga_id} not found")
            rows = await repo.history(saga_id)
            actions = await repo.operator_actions(saga_id) if caller.is_operator else []
        return SagaHistoryView(saga_id=str(saga_id), entries=[HistoryEntry(
            at=r["at"], event_type=r["event_type"], from_status=r["from_status"],
            to_status=r["to_status"], actor=r["actor"], message_id=r["message_id"],
            detail=r["detail"]) for r in rows], operator_actions=[OperatorActionEntry(
                at=a["at"], operator=a["operator"], action=a["action"], reason=a["reason"],
                detail=a["detail"]) for a in actions])

    @router.post("/sagas/{saga_id}/cancel", status_code=202, tags=["sagas"],
                 responses={**AUTH_RESPONSES, **_NOT_YOURS,
                            409: {"description": "The saga is terminal or already "
                                                 "compensating"},
                            422: {"description": "A reason that is blank or too long"}})
    async def cancel(saga_id: uuid.UUID, request: Request, caller: CustomerOrOperator,
                     body: CancelRequest | None = None) -> JSONResponse:
        rt = runtime_of(request)
        reason = body.reason if body is not None else None
        action = None
        if caller.is_operator:
            # Recorded whether or not the operator said why: the contract's cancel takes no
            # body. sagactl and the console always ask for a reason.
            action = OperatorAction(caller.subject, SAGA_CANCELLED, reason)
        # The request's span, OrdenCancelada's parent (as for POST /orders).
        span_id = new_span_id()
        tracing.annotate_current_span(span_id=span_id)

        async def attempt() -> OrderStatus:
            async with rt.uow() as uow:
                return await cancel_saga(uow, stores(uow), str(saga_id), _actor(caller),
                                         settings, request_span_id=span_id,
                                         customer_id=caller.owner_filter(),
                                         operator_action=action)

        try:
            status = await retry_on_conflict(attempt, what="cancel saga")
        except SagaNotFound:
            raise HTTPException(404, detail=f"saga {saga_id} not found") from None
        except CannotCancel as exc:
            return JSONResponse(status_code=409, content={
                "detail": str(exc), "saga_id": str(saga_id), "status": exc.status.value})
        log.info("saga cancelled", extra={"saga_id": str(saga_id),
                                          "event_type": "OrdenCancelada",
                                          "status": "COMPENSATING", "span_id": span_id,
                                          "parent_span_id": None})
        return JSONResponse(status_code=202, content={"saga_id": str(saga_id),
                                                      "status": status.value})

    @router.post("/sagas/{saga_id}/retry", status_code=202, tags=["sagas"],
                 responses={**AUTH_RESPONSES, 404: {"description": "No such saga"},
                            409: {"description": "The saga is not in a step pedidos can "
                                                 "drive again (only PENDIENTE_VALIDACION is)"}})
    async def retry(saga_id: uuid.UUID, request: Request, caller: Operator,
                    body: RetryRequest | None = None) -> JSONResponse:
        """Drives the saga's current step again: its OrdenSolicitada sent again under a new
        message id, its step's deadline started afresh (docs/operations.md, "Retrying a
        step")."""
        rt = runtime_of(request)
        span_id = new_span_id()
        tracing.annotate_current_span(span_id=span_id)
        action = OperatorAction(caller.subject, STEP_RETRIED,
                                body.reason if body is not None else None)

        async def attempt() -> str:
            async with rt.uow() as uow:
                return await retry_step(uow, stores(uow), str(saga_id), action, settings,
                                        request_span_id=span_id)

        try:
            message_id = await retry_on_conflict(attempt, what="retry saga step")
        except SagaNotFound:
            raise HTTPException(404, detail=f"saga {saga_id} not found") from None
        except CannotRetry as exc:
            return JSONResponse(status_code=409, content={
                "detail": str(exc), "saga_id": str(saga_id), "status": exc.status.value})
        except RequestGone as exc:
            return JSONResponse(status_code=409, content={"detail": str(exc),
                                                          "saga_id": str(saga_id)})
        log.info("saga step retried", extra={"saga_id": str(saga_id),
                                             "event_type": "OrdenSolicitada",
                                             "status": "PROCESSING", "span_id": span_id,
                                             "parent_span_id": None})
        return JSONResponse(status_code=202, content={
            "saga_id": str(saga_id), "status": OrderStatus.PENDIENTE_VALIDACION.value,
            "step": "validacion", "message_id": message_id})

    return router


def _trace_id(traceparent: object) -> str | None:
    """The trace id of a W3C ``traceparent`` (version-traceid-spanid-flags)."""
    parts = traceparent.split("-") if isinstance(traceparent, str) else []
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def _actor(caller: Principal) -> str:
    """Who cancelled, as the saga's history records it."""
    return f"{OPERATOR if caller.is_operator else CUSTOMER}:{caller.subject}"
