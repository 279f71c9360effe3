"""The API's HTML docs (Swagger UI at /docs, ReDoc at /redoc), for operators only, as the
contract has it. The OpenAPI document they render stays open at /openapi.json: the contract
publishes it there, and clients (code generators, the property-based tests) learn from it how
to authenticate; it holds no data."""

from __future__ import annotations

from fastapi import APIRouter, Security
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

from sagakit.auth import require_operator


def operator_docs_router(title: str) -> APIRouter:
    router = APIRouter(include_in_schema=False, dependencies=[Security(require_operator)])

    @router.get("/docs")
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{title} - docs")

    @router.get("/redoc")
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title=f"{title} - ReDoc")

    return router
