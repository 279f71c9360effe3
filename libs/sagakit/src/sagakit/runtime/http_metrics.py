"""Counts every HTTP request a service's app answers (``http_requests_total``,
``http_request_duration_seconds``) by the template of the route that served it and the status.

Every label value is bounded: the route is the template (``/orders/{order_id}``), never the
path a client sent, and a path no route matches is ``unmatched``; a method outside HTTP's
usual ones is ``other``. A plain ASGI middleware (no per-request task or body copy): it reads
the route FastAPI's router leaves in the request's scope once it has matched one.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sagakit.observability import metrics

UNMATCHED = "unmatched"
OTHER_METHOD = "other"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Probes and scrapes: frequent, answered by every service alike, and not what a person asks.
NOT_COUNTED = frozenset({"/health", "/ready", "/metrics"})


def route_of(scope: Scope) -> str:
    route: Any = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    return str(template) if template else UNMATCHED


class HttpMetricsMiddleware:
    def __init__(self, app: ASGIApp, service: str) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before it answers

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = route_of(scope)
            if route not in NOT_COUNTED:
                method = scope["method"] if scope["method"] in METHODS else OTHER_METHOD
                metrics.HTTP_REQUESTS.labels(self.service, method, route, str(status)).inc()
                metrics.HTTP_REQUEST_DURATION.labels(self.service, method, route).observe(
                    time.perf_counter() - started)
