"""The identity provider's HTTP API: ``POST /token`` hands out a signed JWT for whatever subject
and roles it is asked, with no password: it is a development stand-in for a real OIDC issuer
(Keycloak, Auth0...), never to be exposed beyond the machine. It publishes what a real one
does for the services to verify its tokens: its discovery document and its JWKS."""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from identity_provider.keys import ALGORITHM, KeyRing, SigningKey
from identity_provider.settings import IdentityProviderSettings

Role = Literal["customer", "operator"]


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sub: str = Field(..., min_length=1, max_length=100, pattern=r"^[^\x00]*$",
                     description="The subject: a customer's id, or an operator's name.")
    roles: Annotated[list[Role], Field(min_length=1, max_length=2)]
    expires_in: int | None = Field(None, ge=1, description=(
        "Seconds the token is valid for; the provider's default when absent."))

    @field_validator("sub")
    @classmethod
    def _utf8(cls, sub: str) -> str:
        # "\ud800" is valid JSON and no UTF-8: a token cannot carry it (a 422, not a 500).
        try:
            sub.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("not valid UTF-8 text (a lone surrogate)") from None
        return sub


class TokenResponse(BaseModel):
    access_token: str
    token_type: Literal["Bearer"] = "Bearer"
    expires_in: int


def key_ring(settings: IdentityProviderSettings) -> KeyRing:
    return KeyRing(SigningKey.from_file(settings.signing_key_file),
                   tuple(SigningKey.from_file(p) for p in settings.published_key_files))


def create_app(settings: IdentityProviderSettings | None = None,
               keys: KeyRing | None = None) -> FastAPI:
    settings = settings or IdentityProviderSettings()
    keys = keys or key_ring(settings)
    issuer = settings.issuer_url
    app = FastAPI(title="identity provider (development stand-in)", version="1.0.0")

    @app.exception_handler(RequestValidationError)
    async def refused(_: Request, exc: RequestValidationError) -> JSONResponse:
        # The refused input is left out: text that is not valid UTF-8 cannot be sent back.
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]})

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/.well-known/openid-configuration")
    async def discovery() -> dict[str, Any]:
        return {
            "issuer": issuer,
            "jwks_uri": f"{issuer}/.well-known/jwks.json",
            "token_endpoint": f"{issuer}/token",
            "response_types_supported": ["token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [ALGORITHM],
            "claims_supported": ["iss", "sub", "aud", "exp", "iat", "jti", "roles"],
        }

    @app.get("/.well-known/jwks.json")
    async def jwks() -> dict[str, Any]:
        return keys.jwks()

    @app.post("/token", response_model=TokenResponse)
    async def token(body: TokenRequest) -> TokenResponse:
        lifetime = min(body.expires_in or settings.token_lifetime_s,
                       settings.max_token_lifetime_s)
        now = int(time.time())
        claims = {"iss": issuer, "sub": body.sub, "aud": settings.audience,
                  "roles": sorted(set(body.roles)), "iat": now, "exp": now + lifetime,
                  "jti": uuid.uuid4().hex}
        return TokenResponse(access_token=keys.signing.sign(claims), expires_in=lifetime)

    return app
