"""pagos' HTTP API: payment records, and an operator's resolution of a payment left for a
manual refund.

A customer reads only its own payments: a saga with none of its payments answers 404, whether
it has another customer's or none at all (its existence is not revealed). An operator reads any
saga's, an empty list when it has none, and alone records resolutions.

A customer learns that a charge was declined, never why: the gateway's decline code
(``insufficient_funds``, ``incorrect_cvc``, ``lost_card``...) and the attempt log would tell
someone testing stolen cards which card numbers are live and what to fix. A customer's view
says ``declined`` (``COARSE_DECLINE``) and lists no attempts; an operator's has the detail."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response, Security
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from pagos.adapters.payment_repository import payment_records
from pagos.adapters.resolutions import ResolutionRepository
from pagos.usecases.resolve_payment import (
    NothingToResolve,
    PaymentNotFound,
    Resolution,
    ResolvedOtherwise,
    resolve_payment,
)
from sagakit.auth import AUTH_RESPONSES, CUSTOMER, OPERATOR, Principal, require
from sagakit.runtime import runtime_of
from sagakit.store import retry_on_conflict

router = APIRouter(tags=["payments"])

COARSE_DECLINE = "declined"


class Refund(BaseModel):
    refund_id: str | None
    amount: str
    status: str


class PaymentRecord(BaseModel):
    payment_id: str
    saga_id: str
    order_id: str | None
    status: str
    amount: str | None
    currency: str | None
    charge_id: str | None
    decline_code: str | None
    """The gateway's decline code for an operator; ``declined`` for a customer."""
    charge_attempts: int
    resolve_attempts: int
    """Replays of the charge made to resolve its cancellation (``charge_attempts`` are the
    charge's own calls)."""
    refund_attempts: int
    manual_refund_required: bool
    refund: Refund | None
    attempts: list[dict[str, Any]]
    """Every call made to the gateway, for an operator; empty for a customer."""
    created_at: datetime
    updated_at: datetime


def _money(value: Decimal | None) -> str | None:
    return f"{value:.2f}" if value is not None else None


def _record(row: dict[str, Any], *, detailed: bool) -> PaymentRecord:
    """``row`` as its reader may see it: ``detailed`` for an operator, coarse for a customer."""
    refund = None
    if row["status"] in ("REFUNDING", "REFUNDED", "REFUND_FAILED"):
        refund = Refund(refund_id=row["refund_id"], amount=_money(row["amount_refunded"]) or "0.00",
                        status={"REFUNDING": "pending", "REFUNDED": "succeeded",
                                "REFUND_FAILED": "failed"}[row["status"]])
    return PaymentRecord(
        payment_id=str(row["payment_id"]), saga_id=row["saga_id"],
        order_id=str(row["order_id"]) if row["order_id"] else None, status=row["status"],
        amount=_money(row["amount"]), currency=row["currency"], charge_id=row["charge_id"],
        decline_code=(row["decline_code"] if detailed or row["decline_code"] is None
                      else COARSE_DECLINE),
        charge_attempts=row["charge_attempts"],
        resolve_attempts=row["resolve_attempts"], refund_attempts=row["refund_attempts"],
        manual_refund_required=row["manual_refund_required"], refund=refund,
        attempts=row["attempt_log"] if detailed else [], created_at=row["created_at"],
        updated_at=row["updated_at"])


@router.get("/payments", response_model=list[PaymentRecord], responses={
    **AUTH_RESPONSES, 404: {"description": "A customer's: no payment of its own for this saga"}})
async def list_payments(request: Request, saga_id: Annotated[uuid.UUID, Query()],
                        caller: Annotated[Principal, Security(require(CUSTOMER, OPERATOR))]
                        ) -> list[PaymentRecord]:
    # A saga id is a UUID (docs/standard.md#saga-and-span-ids), stored in its canonical text form.
    async with runtime_of(request).engine.connect() as conn:
        rows = await payment_records(conn, str(saga_id), caller.owner_filter())
    if not rows and not caller.is_operator:
        raise HTTPException(404, detail=f"no payment of yours for saga {saga_id}")
    return [_record(r, detailed=caller.is_operator) for r in rows]


# Text a person wrote: not empty, no NUL (PostgreSQL's text refuses it).
_TEXT = r"^[^\x00]*\S[^\x00]*$"


class ResolutionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reference: Annotated[str, Field(min_length=1, max_length=200, pattern=_TEXT)]
    """The finance system's reference of the refund or settlement made by hand."""
    note: Annotated[str | None, Field(min_length=1, max_length=1000, pattern=_TEXT)] = None


class ResolutionView(BaseModel):
    payment_id: str
    saga_id: str
    reference: str
    note: str | None
    resolved_by: str
    resolved_at: datetime | None


def _resolution_view(r: Resolution) -> ResolutionView:
    return ResolutionView(payment_id=r.payment_id, saga_id=r.saga_id, reference=r.reference,
                          note=r.note, resolved_by=r.operator, resolved_at=r.at)


@router.post("/payments/{payment_id}/resolution", response_model=ResolutionView,
             status_code=201, responses={
                 **AUTH_RESPONSES,
                 200: {"description": "Resolved before with this same reference"},
                 404: {"description": "No such payment"},
                 409: {"description": "The payment is not marked for a manual refund, or was "
                                      "resolved with another reference"}})
async def resolve(payment_id: uuid.UUID, body: ResolutionRequest, request: Request,
                  response: Response,
                  caller: Annotated[Principal, Security(require(OPERATOR))]
                  ) -> ResolutionView | JSONResponse:
    """Records that finance settled a payment marked for a manual refund, by hand, under
    ``reference``: the operator's action, audited (docs/operations.md, "Manual refunds")."""
    rt = runtime_of(request)

    async def attempt() -> tuple[Resolution, bool]:
        async with rt.uow() as uow:
            done = await resolve_payment(uow, ResolutionRepository(uow), str(payment_id),
                                         operator=caller.subject, reference=body.reference,
                                         note=body.note)
            return done.resolution, done.created

    try:
        resolution, created = await retry_on_conflict(attempt, what="resolve payment")
    except PaymentNotFound:
        raise HTTPException(404, detail=f"payment {payment_id} not found") from None
    except NothingToResolve as exc:
        return JSONResponse(status_code=409, content={
            "detail": str(exc), "payment_id": str(payment_id), "status": exc.status.value})
    except ResolvedOtherwise as exc:
        return JSONResponse(status_code=409, content={
            "detail": str(exc), "payment_id": str(payment_id),
            "resolution": _resolution_view(exc.resolution).model_dump(mode="json")})
    if not created:
        response.status_code = 200
    return _resolution_view(resolution)
