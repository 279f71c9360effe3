"""HTTP request metrics: by the route's template and the status, never by the raw path, so that
a client cannot make a series per order id; a request that raises counts as the 500 it gets."""

from __future__ import annotations

import httpx
from fastapi import FastAPI, HTTPException
from prometheus_client import REGISTRY

from sagakit.runtime.http_metrics import HttpMetricsMiddleware

SERVICE = "http-metrics-test"


def _app() -> FastAPI:
    app = FastAPI()
    app.add_middleware(HttpMetricsMiddleware, service=SERVICE)

    @app.get("/orders/{order_id}")
    async def order(order_id: str) -> dict[str, str]:
        if order_id == "missing":
            raise HTTPException(404, "no such order")
        return {"order_id": order_id}

    @app.post("/orders")
    async def place() -> None:
        raise HTTPException(429, "slow down")

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("a bug")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _count(method: str, route: str, status: str) -> float:
    return REGISTRY.get_sample_value("http_requests_total", {
        "service": SERVICE, "method": method, "route": route, "status": status}) or 0.0


def _series() -> set[tuple[str, ...]]:
    return {tuple(s.labels.values()) for m in REGISTRY.collect() if m.name == "http_requests"
            for s in m.samples if s.labels.get("service") == SERVICE
            and s.name == "http_requests_total"}


async def test_requests_are_counted_by_route_template_and_status() -> None:
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for order_id in ("o-1", "o-2", "o-3"):
            assert (await client.get(f"/orders/{order_id}")).status_code == 200
        assert (await client.get("/orders/missing")).status_code == 404
        assert (await client.post("/orders")).status_code == 429
        assert (await client.get("/boom")).status_code == 500
        assert (await client.get("/no/such/path/123")).status_code == 404
        assert (await client.request("BREW", "/orders/o-1")).status_code == 405
        assert (await client.get("/health")).status_code == 200
    assert _count("GET", "/orders/{order_id}", "200") == 3
    assert _count("GET", "/orders/{order_id}", "404") == 1
    assert _count("POST", "/orders", "429") == 1
    assert _count("GET", "/boom", "500") == 1
    assert _count("GET", "unmatched", "404") == 1
    assert _count("other", "/orders/{order_id}", "405") == 1
    # No raw path, no probe: a bounded set of series whatever the clients send.
    routes = {labels[2] for labels in _series()}
    assert routes == {"/orders/{order_id}", "/orders", "/boom", "unmatched"}
    assert REGISTRY.get_sample_value("http_request_duration_seconds_count", {
        "service": SERVICE, "method": "GET", "route": "/orders/{order_id}"}) == 4
