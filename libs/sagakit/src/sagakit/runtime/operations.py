"""The operational endpoints every service serves: /health and /ready, open to anyone (an
orchestrator probes them), and /metrics, for operators (Prometheus scrapes it with an operator's
token).

/ready is open to anyone, so it must cost next to nothing whoever calls it how often: the
database is asked (``SELECT 1`` on the pool) at most once per ``READY_CACHE_S``, by one request
at a time, within 2 s; every other call in between answers what the last one learned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from fastapi import APIRouter, Request, Response, Security
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from sagakit.auth import AUTH_RESPONSES, require_operator
from sagakit.runtime.service import Runtime, runtime_of

PROBE_TIMEOUT_S = 2.0


class DatabaseProbe:
    """The database's readiness, learned at most once per ``cache_s`` by one caller at a time;
    the others wait for that one's answer (at most ``PROBE_TIMEOUT_S``) or take the last."""

    def __init__(self, cache_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._cache_s = cache_s
        self._clock = clock
        self._lock = asyncio.Lock()
        self._result = ""
        self._at = -float("inf")

    def _fresh(self) -> bool:
        return self._clock() - self._at < self._cache_s

    async def check(self, rt: Runtime) -> str:
        if self._fresh():
            return self._result
        async with self._lock:
            if not self._fresh():
                self._result = await self._probe(rt)
                self._at = self._clock()
            return self._result

    @staticmethod
    async def _probe(rt: Runtime) -> str:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S), rt.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            return "ok"
        except Exception as exc:
            return f"unreachable: {type(exc).__name__}"


def operational_router(ready_cache_s: float = 1.0) -> APIRouter:
    router = APIRouter(tags=["operations"])
    database = DatabaseProbe(ready_cache_s)

    @router.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/ready")
    async def ready(request: Request) -> JSONResponse:
        rt = runtime_of(request)
        checks = {"database": await database.check(rt)}
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
