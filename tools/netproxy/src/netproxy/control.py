"""The proxy as a part of the local stack: every route of ``netproxy.layout`` and an HTTP control
API through which the chaos suite sets and clears faults."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from pydantic import BaseModel, Field

from netproxy.layout import CONTROL_PORT, stack_routes
from netproxy.proxy import ProxySet, Route

log = logging.getLogger("netproxy")


class FaultChange(BaseModel):
    latency_s: float | None = Field(None, ge=0)
    blackhole: bool | None = None
    refuse: bool | None = None


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
    async with ProxySet(stack_routes(pg_port, gateway_port)) as proxies:
        config = uvicorn.Config(_control_app(proxies), host="127.0.0.1", port=CONTROL_PORT,
                                log_level="warning", access_log=False)
        await uvicorn.Server(config).serve()
