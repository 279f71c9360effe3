"""HTTP API in the style of Stripe: POST /v1/charges, POST /v1/refunds, GET /ledger.

Every call but GET /health takes the gateway's secret key (``Authorization: Bearer sk_...``,
``fake_gateway.secret_key``); without it, 401. Amounts are integer minor units of an ISO 4217
currency (``saga_contracts.minor_units``: 1000 CLP is 1000, 10.00 USD is 1000); a currency
without a minor unit is refused (400). Every POST takes an ``Idempotency-Key``: the same key
with the same parameters replays the first answer; the same key with other parameters is
refused (400).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from fake_gateway.ledger import Ledger
from fake_gateway.secret_key import configured_key, presented
from fake_gateway.tokens import behaviour_of
from saga_contracts.minor_units import UnknownCurrency, exponent


class ChargeRequest(BaseModel):
    amount: int = Field(..., gt=0, description="Minor units")
    currency: str = Field(..., min_length=3, max_length=3)
    source: str = Field(..., min_length=1, description="Payment token")
    description: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)


class RefundRequest(BaseModel):
    charge: str
    amount: int | None = Field(None, gt=0, description="Minor units; the rest of the charge if absent")
    metadata: dict[str, str] = Field(default_factory=dict)


def _error(status: int, type_: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"type": type_, "message": message, **extra}},
                        status_code=status)


class _Unauthenticated(Exception):
    """A call without the gateway's secret key."""


def _fingerprint(body: BaseModel) -> str:
    return hashlib.sha256(json.dumps(body.model_dump(), sort_keys=True).encode()).hexdigest()


def create_app(ledger_path: Path | None = None, slow_seconds: float | None = None,
               secret_key: str | None = None) -> FastAPI:
    """``secret_key``: the key callers must present; by default the one the environment
    gives (``fake_gateway.secret_key``), without which the gateway does not start."""
    key = secret_key or configured_key()
    path = ledger_path or Path(os.environ.get("GATEWAY_LEDGER_PATH", ".local/gateway/ledger.sqlite3"))
    slow = slow_seconds if slow_seconds is not None else float(
        os.environ.get("GATEWAY_SLOW_SECONDS", "35"))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.ledger = Ledger(path)
        yield
        app.state.ledger.close()

    app = FastAPI(title="fake payment gateway", lifespan=lifespan)

    async def authenticated(authorization: str | None = Header(None)) -> None:
        # A dependency runs before the body is read: a caller without the key learns nothing,
        # not even whether its request was well formed.
        if not presented(authorization, key):
            raise _Unauthenticated

    @app.exception_handler(_Unauthenticated)
    async def unauthenticated(request: Request, exc: Exception) -> JSONResponse:
        response = _error(401, "invalid_request_error",
                          "Invalid API Key provided: give the secret key as "
                          "Authorization: Bearer sk_...")
        response.headers["WWW-Authenticate"] = 'Bearer realm="fake-gateway"'
        return response

    keyed = [Depends(authenticated)]

    def ledger(request: Request) -> Ledger:
        return request.app.state.ledger

    async def idempotent(request: Request, endpoint: str, key: str | None, body: BaseModel
                         ) -> tuple[JSONResponse | None, int]:
        if not key:
            return _error(400, "invalid_request_error", "Idempotency-Key header is required"), 0
        record = ledger(request).idempotency_attempt(endpoint, key, _fingerprint(body))
        if record["fingerprint"] != _fingerprint(body):
            return _error(400, "idempotency_error",
                          "Keys for idempotent requests can only be used with the same "
                          "parameters they were first used with."), 0
        if record["status_code"] is not None:
            resp = JSONResponse(record["body"], status_code=record["status_code"])
            resp.headers["Idempotent-Replayed"] = "true"
            return resp, record["attempts"]
        return None, record["attempts"]

    def answer(request: Request, endpoint: str, key: str, status: int, body: Any
               ) -> JSONResponse:
        ledger(request).remember(endpoint, key, status, body)
        return JSONResponse(body, status_code=status)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/charges", dependencies=keyed)
    async def create_charge(body: ChargeRequest, request: Request,
                            idempotency_key: str | None = Header(None)) -> JSONResponse:
        try:
            exponent(body.currency)
        except UnknownCurrency:
            return _error(400, "invalid_request_error",
                          f"Invalid currency: {body.currency.lower()} (an ISO 4217 code with "
                          "a minor unit)", code="invalid_currency")
        replay, attempts = await idempotent(request, "charges", idempotency_key, body)
        if replay is not None:
            return replay
        assert idempotency_key is not None
        behaviour = behaviour_of(body.source)
        if attempts <= behaviour.transient_charge_failures:
            # Not remembered: the next attempt with this key gets another chance.
            return _error(503, "api_error", f"temporarily unavailable (attempt {attempts})")
        if behaviour.decline_code:
            charge = ledger(request).create_charge(
                amount=body.amount, currency=body.currency.lower(), source=body.source,
                status="failed", decline_code=behaviour.decline_code,
                idempotency_key=idempotency_key, metadata=body.metadata)
            return answer(request, "charges", idempotency_key, 402, {"error": {
                "type": "card_error", "code": "card_declined",
                "decline_code": behaviour.decline_code, "charge": charge["id"],
                "message": "Your card was declined."}})
        charge = ledger(request).create_charge(
            amount=body.amount, currency=body.currency.lower(), source=body.source,
            status="succeeded", decline_code=None, idempotency_key=idempotency_key,
            metadata=body.metadata)
        response = answer(request, "charges", idempotency_key, 200, charge)
        if behaviour.slow:
            await asyncio.sleep(slow)  # captured already; the caller gives up before this ends
        return response

    @app.post("/v1/refunds", dependencies=keyed)
    async def create_refund(body: RefundRequest, request: Request,
                            idempotency_key: str | None = Header(None)) -> JSONResponse:
        replay, attempts = await idempotent(request, "refunds", idempotency_key, body)
        if replay is not None:
            return replay
        assert idempotency_key is not None
        charge = ledger(request).charge(body.charge)
        if charge is None or charge["status"] != "succeeded":
            return answer(request, "refunds", idempotency_key, 404, {"error": {
                "type": "invalid_request_error", "code": "resource_missing",
                "message": f"No such charge: {body.charge}"}})
        behaviour = behaviour_of(ledger(request).source_of(body.charge))
        if behaviour.refund_always_fails:
            return _error(500, "api_error", "refund processor unavailable")
        if attempts <= behaviour.transient_refund_failures:
            return _error(503, "api_error", f"temporarily unavailable (attempt {attempts})")
        amount = body.amount or (charge["amount"] - charge["amount_refunded"])
        try:
            refund = ledger(request).create_refund(charge_id=body.charge, amount=amount,
                                                   idempotency_key=idempotency_key)
        except ValueError as exc:
            return answer(request, "refunds", idempotency_key, 400, {"error": {
                "type": "invalid_request_error", "code": "charge_already_refunded",
                "message": str(exc)}})
        return answer(request, "refunds", idempotency_key, 200, refund)

    @app.get("/ledger", dependencies=keyed)
    async def get_ledger(request: Request) -> dict[str, Any]:
        return ledger(request).snapshot()

    return app
