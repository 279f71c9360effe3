"""The proxy as a part of the local stack: every route of ``netproxy.layout`` and an HTTP control
API through which the chaos suite sets and clears faults."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from pydantic import BaseModel, Field

from netproxy.layout import CONTROL_PORT, registry_routes, stack_routes
from netproxy.proxy import ProxySet, Route

log = logging.getLogger("netproxy")


class FaultChange(BaseModel):
    latency_s: float | None = Field(None, ge=0)
    blackhole: bool | None = None
    refuse: bool | None = None
    html_share: float | None = Field(None, ge=0, le=1)
    garbage_share: float | None = Field(None, ge=0, le=1)


def _control_app(proxies: ProxySet) -> Any:
    from fastapi import FastAPI, HTTPException

    app = FastAPI(title="netproxy")

    def route(name: str) -> Route:
        if name not in proxies.routes:
            raise HTTPException(404, f"no route {name}; routes: {sorted(proxies.routes)}")
        return proxies[name]

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/routes")
    async def routes() -> list[dict[str, object]]:
        return [r.describe() for r in proxies.routes.values()]

    @app.put("/routes/{name}")
    async def change(name: str, body: FaultChange) -> dict[str, object]:
        r = route(name)
        r.set(**body.model_dump())
        log.warning("route %s: %s", name, json.dumps(r.describe()))
        return r.describe()

    @app.get("/routes/{name}/garbled")
    async def garbled(name: str) -> list[dict[str, str | None]]:
        """The requests the route answered itself (reply faults), oldest first."""
        return [{"kind": g.kind, "idempotency_key": g.idempotency_key}
                for g in route(name).garbled]

    @app.post("/routes/{name}/reset")
    async def reset(name: str) -> dict[str, int]:
        return {"reset": route(name).reset_connections()}

    @app.delete("/faults")
    async def clear() -> dict[str, str]:
        proxies.clear()
        log.warning("every fault cleared")
        return {"status": "cleared"}

    return app


async def serve() -> None:
    import uvicorn

    pg_port = int(os.environ.get("PG_PORT", "25432"))
    gateway_port = int(os.environ.get("GATEWAY_PORT", "8010"))
    # The stack's shape, as the stack that starts this part was started.
    replicas = int(os.environ.get("SAGA_REPLICAS", "1"))
    brokers = int(os.environ.get("SAGA_KAFKA_BROKERS", "1"))
    registry_port = int(os.environ.get("REGISTRY_PORT", "8081"))
    routes = {**stack_routes(pg_port, gateway_port, replicas, brokers),
              **registry_routes(registry_port, replicas)}
    async with ProxySet(routes) as proxies:
        config = uvicorn.Config(_control_app(proxies), host="127.0.0.1", port=CONTROL_PORT,
                                log_level="warning", access_log=False)
        await uvicorn.Server(config).serve()
