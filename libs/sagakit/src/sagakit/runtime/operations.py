"""The operational endpoints every service serves: /health and /ready, open to anyone (an
orchestrator probes them), and /metrics, for operators (Prometheus scrapes it with an operator's
token)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response, Security
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from sagakit.auth import AUTH_RESPONSES, require_operator
from sagakit.runtime.service import runtime_of


def operational_router() -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/ready")
    async def ready(request: Request) -> JSONResponse:
        rt = runtime_of(request)
        checks: dict[str, str] = {}
        try:
            async with rt.engine.connect() as conn:
                await asyncio.wait_for(conn.execute(text("SELECT 1")), 2)
            checks["database"] = "ok"
        except Exception as exc:
            checks["database"] = f"unreachable: {type(exc).__name__}"
        if rt.consumer is not None and rt.service_settings.run_consumer:
            checks["kafka"] = "ok" if rt.consumer.assigned.is_set() else "not connected"
        ok = all(v == "ok" for v in checks.values())
        # Not a check: which replica publishes the outbox (make status shows it).
        relay = ("off" if not rt.service_settings.run_relay
                 else "leader" if rt.relay.is_leader else "standby")
        return JSONResponse({"status": "ready" if ok else "not ready", "checks": checks,
                             "instance": rt.service_settings.instance(), "relay": relay},
                            status_code=200 if ok else 503)

    @router.get("/metrics", dependencies=[Security(require_operator)], responses=AUTH_RESPONSES)
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return router
