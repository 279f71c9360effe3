"""The identity provider's HTTP API: ``POST /token`` hands out a signed JWT for whatever subject
and roles it is asked, with no password: it is a development stand-in for a real OIDC issuer
(Keycloak, Auth0...), never to be exposed beyond the machine. It publishes what a real one
does for the services to verify its tokens: its discovery document and its JWKS.

A browser signs in as with a real issuer: the authorization-code flow with PKCE
(``identity_provider.authorization``), ``/authorize`` showing a development sign-in form (a
subject and a role) and ``POST /token`` taking the standard form-encoded
``grant_type=authorization_code`` request. The JSON ``POST /token`` stays what it is: a request
is routed by its content type."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from html import escape
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import FastAPI, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from starlette.routing import Match
from starlette.types import Scope

from identity_provider import sign_in_page
from identity_provider.authorization import (
    MAX_PARAMETER_CHARS,
    ROLES,
    AuthorizationError,
    AuthorizationRequest,
    CodeStore,
    Role,
    check_request,
    redirect_uri_allowed,
)
from identity_provider.keys import ALGORITHM, KeyRing, SigningKey
from identity_provider.settings import IdentityProviderSettings

FORM = "application/x-www-form-urlencoded"
# RFC 6749 §5.1: a token response is never cached.
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def _utf8(sub: str) -> str:
    # "\ud800" is valid JSON and no UTF-8: a token cannot carry it (a 422, not a 500).
    try:
        sub.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not valid UTF-8 text (a lone surrogate)") from None
    return sub


class AuthorizationParams(BaseModel):
    """A client's authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3): as asked, unchecked;
    ``check_request`` decides. The sign-in form sends the same fields back."""

    response_type: str | None = None
    client_id: str | None = None
    redirect_uri: str | None = None
    code_challenge: str | None = None
    code_challenge_method: str | None = None
    state: str | None = None
    scope: str | None = None


class SignInFields(AuthorizationParams):
    """The sign-in form: who signs in, as which role, for the request it carries."""

    subject: str
    role: str


SubjectText = Annotated[str, Field(..., min_length=1, max_length=100, pattern=r"^[^\x00]*$",
                                   description="The subject: a customer's id, or an operator's "
                                               "name."), AfterValidator(_utf8)]


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sub: SubjectText
    roles: Annotated[list[Role], Field(min_length=1, max_length=2)]
    expires_in: int | None = Field(None, ge=1, description=(
        "Seconds the token is valid for; the provider's default when absent."))


class SignInForm(BaseModel):
    """What a person types into the sign-in form: the subject the JSON request accepts."""

    sub: SubjectText


class TokenResponse(BaseModel):
    access_token: str
    token_type: Literal["Bearer"] = "Bearer"
    expires_in: int


class FormEncodedRoute(APIRoute):
    """A route taken only by form-encoded requests, so that the OAuth token request and the
    provider's JSON one share ``POST /token``."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        content_type = dict(scope.get("headers") or []).get(b"content-type", b"")
        if match is Match.FULL and not content_type.decode("latin-1").lower().startswith(FORM):
            return Match.NONE, {}
        return match, child


def _oauth_error(error: AuthorizationError, status: int = 400) -> JSONResponse:
    return JSONResponse(status_code=status, headers=NO_STORE, content={
        "error": error.error, "error_description": error.description})


def _redirect(uri: str, **params: str | None) -> RedirectResponse:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return RedirectResponse(f"{uri}{'&' if '?' in uri else '?'}{query}", status_code=303)


def key_ring(settings: IdentityProviderSettings) -> KeyRing:
    return KeyRing(SigningKey.from_file(settings.signing_key_file),
                   tuple(SigningKey.from_file(p) for p in settings.published_key_files))


def create_app(settings: IdentityProviderSettings | None = None,
               keys: KeyRing | None = None) -> FastAPI:
    settings = settings or IdentityProviderSettings()
    keys = keys or key_ring(settings)
    issuer = settings.issuer_url
    signin = (settings.signin_url or issuer).rstrip("/")
    app = FastAPI(title="identity provider (development stand-in)", version="1.0.0")
    codes = CodeStore()

    def signed(sub: str, roles: Sequence[str], lifetime: int) -> str:
        now = int(time.time())
        return keys.signing.sign({"iss": issuer, "sub": sub, "aud": settings.audience,
                                  "roles": sorted(set(roles)), "iat": now, "exp": now + lifetime,
                                  "jti": uuid.uuid4().hex})

    def authorization_request(params: dict[str, str | None]) -> AuthorizationRequest:
        return check_request(registered_uris=settings.redirect_uris, **params)

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
            "token_endpoint": f"{signin}/token",
            "authorization_endpoint": f"{signin}/authorize",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
            # Public clients: PKCE, not a client secret, proves who trades the code.
            "token_endpoint_auth_methods_supported": ["none"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [ALGORITHM],
            "claims_supported": ["iss", "sub", "aud", "exp", "iat", "jti", "roles"],
        }

    @app.get("/.well-known/jwks.json")
    async def jwks() -> dict[str, Any]:
        return keys.jwks()

    if settings.public_only:
        # What the services fetch, and nothing that signs: no form, no token.
        return app

    @app.get("/authorize", response_class=HTMLResponse, response_model=None)
    async def authorize(query: Annotated[AuthorizationParams, Query()]
                        ) -> HTMLResponse | RedirectResponse:
        """The development sign-in form, for a client's authorization request."""
        params = query.model_dump()
        try:
            request = authorization_request(params)
        except AuthorizationError as exc:
            return _refused_authorization(exc, params)
        return HTMLResponse(sign_in_page.render(request))

    @app.post("/authorize", response_class=HTMLResponse, response_model=None)
    async def sign_in(form: Annotated[SignInFields, Form()]
                      ) -> HTMLResponse | RedirectResponse:
        """The form sent back: a code for the subject and role, to the client's redirect URI."""
        params = form.model_dump(exclude={"subject", "role"})
        subject, role = form.subject, form.role
        try:
            request = authorization_request(params)
        except AuthorizationError as exc:
            return _refused_authorization(exc, params)
        try:
            sub = SignInForm(sub=subject).sub
        except ValidationError as exc:
            return HTMLResponse(sign_in_page.render(
                request, error=f"subject: {exc.errors()[0]['msg']}"), status_code=422)
        if role not in ROLES:
            return HTMLResponse(sign_in_page.render(request, subject=sub,
                                                    error="role: customer or operator"),
                                status_code=422)
        try:
            code = codes.issue(request, sub, [role])
        except AuthorizationError as exc:
            return _refused_authorization(exc, params)
        return _redirect(request.redirect_uri, code=code, state=request.state)

    def _refused_authorization(exc: AuthorizationError, params: dict[str, str | None]
                               ) -> HTMLResponse | RedirectResponse:
        # Until the redirect URI is known to be the client's, the error is told to the person,
        # not sent there (RFC 6749 §4.1.2.1).
        uri = params.get("redirect_uri")
        if params.get("client_id") and uri and redirect_uri_allowed(uri, settings.redirect_uris):
            state = params.get("state")
            return _redirect(uri, error=exc.error, error_description=exc.description,
                             state=state if state and len(state) <= MAX_PARAMETER_CHARS
                             else None)
        return HTMLResponse(f"<!doctype html><title>Sign-in refused</title><h1>Sign-in refused"
                            f"</h1><p>{exc.error}: {escape(exc.description)}</p>",
                            status_code=400)

    async def authorization_code_token(
            grant_type: Annotated[str | None, Form()] = None,
            code: Annotated[str | None, Form()] = None,
            redirect_uri: Annotated[str | None, Form()] = None,
            client_id: Annotated[str | None, Form()] = None,
            code_verifier: Annotated[str | None, Form()] = None) -> JSONResponse:
        """RFC 6749 §4.1.3: a code traded for a token, its verifier proving the client."""
        if grant_type != "authorization_code":
            return _oauth_error(AuthorizationError(
                "unsupported_grant_type", "grant_type must be authorization_code"))
        try:
            grant = codes.redeem(code=code, client_id=client_id, redirect_uri=redirect_uri,
                                 code_verifier=code_verifier)
        except AuthorizationError as exc:
            return _oauth_error(exc)
        lifetime = settings.token_lifetime_s
        return JSONResponse(headers=NO_STORE, content={
            "access_token": signed(grant.subject, grant.roles, lifetime), "token_type": "Bearer",
            "expires_in": lifetime, **({"scope": grant.request.scope}
                                       if grant.request.scope else {})})

    # Before the JSON route: it takes only the form-encoded requests, and leaves the rest to it.
    app.router.add_api_route("/token", authorization_code_token, methods=["POST"],
                             include_in_schema=False, route_class_override=FormEncodedRoute)

    @app.post("/token", response_model=TokenResponse)
    async def token(body: TokenRequest) -> TokenResponse:
        lifetime = min(body.expires_in or settings.token_lifetime_s,
                       settings.max_token_lifetime_s)
        return TokenResponse(access_token=signed(body.sub, body.roles, lifetime),
                             expires_in=lifetime)

    return app
