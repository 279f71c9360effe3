"""What a route's caller gets from the auth dependencies: 401 without a valid token (with the
challenge RFC 6750 asks for), 403 without the role, 503 when the issuer's keys cannot be had;
/health and the OpenAPI document stay open, /metrics and the HTML docs are for operators; and
the OpenAPI document declares the bearer scheme on the routes that need it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Annotated

import httpx
import pytest
from fastapi import FastAPI, Security

from sagakit.auth import (
    CUSTOMER,
    OPERATOR,
    AuthSettings,
    Principal,
    TokenVerifier,
    install_authentication,
    require,
)
from sagakit.runtime.api_docs import operator_docs_router
from sagakit.runtime.operations import operational_router

from .issuer_fakes import AUDIENCE, Issuer, SigningKey, running_issuer

KEY = SigningKey.new()


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with running_issuer(KEY) as issuer:
        yield issuer


@pytest.fixture
async def client(issuer: Issuer) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI(docs_url=None, redoc_url=None)
    verifier = TokenVerifier(AuthSettings(issuer=issuer.url, audience=AUDIENCE))
    install_authentication(app, verifier)
    app.include_router(operational_router())
    app.include_router(operator_docs_router("test"))

    @app.get("/things/{thing}")
    async def thing(thing: str, principal: Annotated[
            Principal, Security(require(CUSTOMER, OPERATOR))]) -> dict[str, str]:
        return {"thing": thing, "caller": principal.subject}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        yield http
    await verifier.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_valid_token_with_the_role_is_let_through(issuer: Issuer,
                                                          client: httpx.AsyncClient) -> None:
    r = await client.get("/things/a", headers=bearer(issuer.token(sub="cust-9")))
    assert r.status_code == 200 and r.json() == {"thing": "a", "caller": "cust-9"}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic dXNlcjpwdw=="},
                                     {"Authorization": "Bearer"}])
async def test_no_bearer_token_is_a_401_with_a_challenge(client: httpx.AsyncClient,
                                                         headers: dict[str, str]) -> None:
    r = await client.get("/things/a", headers=headers)
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"] == "Bearer"


async def test_an_invalid_token_is_a_401_saying_so(issuer: Issuer,
                                                   client: httpx.AsyncClient) -> None:
    r = await client.get("/things/a", headers=bearer(issuer.token(aud="elsewhere")))
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'


async def test_a_valid_token_without_the_role_is_a_403(issuer: Issuer,
                                                       client: httpx.AsyncClient) -> None:
    r = await client.get("/things/a", headers=bearer(issuer.token(roles=["auditor"])))
    assert r.status_code == 403


async def test_the_issuer_out_of_reach_is_a_503(issuer: Issuer,
                                                client: httpx.AsyncClient) -> None:
    issuer.failing = True
    r = await client.get("/things/a", headers=bearer(issuer.token()))
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"


async def test_health_and_the_openapi_document_are_open(client: httpx.AsyncClient) -> None:
    assert (await client.get("/health")).status_code == 200
    assert (await client.get("/openapi.json")).status_code == 200


@pytest.mark.parametrize("path", ["/metrics", "/docs", "/redoc"])
async def test_metrics_and_the_html_docs_are_for_operators(issuer: Issuer,
                                                           client: httpx.AsyncClient,
                                                           path: str) -> None:
    assert (await client.get(path)).status_code == 401
    customer = await client.get(path, headers=bearer(issuer.token(roles=["customer"])))
    assert customer.status_code == 403
    operator = await client.get(path, headers=bearer(issuer.token(roles=["operator"])))
    assert operator.status_code == 200


async def test_the_openapi_document_declares_the_bearer_scheme(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
        "description": document["components"]["securitySchemes"]["bearer"]["description"]}
    assert document["paths"]["/things/{thing}"]["get"]["security"] == [{"bearer": []}]
    assert document["paths"]["/metrics"]["get"]["security"] == [{"bearer": []}]
    assert "security" not in document["paths"]["/health"]["get"]
