"""The FastAPI dependencies a route declares to know who calls it: ``authenticated`` (any
valid token), ``require(*roles)`` (a valid token with one of ``roles``) and
``require_operator``. They are ``Security`` dependencies on an ``HTTPBearer`` scheme, so the
OpenAPI document declares the scheme and which routes need it.

No token, or one that is not valid: 401 with ``WWW-Authenticate: Bearer`` (RFC 6750 §3); a
valid token without the role: 403; the issuer's keys unreachable: 503.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sagakit.auth.principal import OPERATOR, Principal
from sagakit.auth.tokens import InvalidToken, IssuerUnavailable, TokenVerifier

log = logging.getLogger("sagakit.auth")

bearer = HTTPBearer(
    auto_error=False, scheme_name="bearer", bearerFormat="JWT",
    description="A JWT from the OIDC issuer the services trust (`AUTH_ISSUER`; the local "
                "stack's identity provider hands them out at `POST /token`). Its `roles` "
                "claim holds `customer` (its `sub` is the customer id) or `operator`.")


AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "No bearer token, or one that is not valid (expired, another issuer "
                         "or audience, a key the issuer does not publish)"},
    403: {"description": "The token's roles do not allow this"},
    503: {"description": "The issuer's keys cannot be fetched: nothing was done; retry"},
}
"""The answers of the auth dependencies, for a route's ``responses``."""


def install_authentication(app: FastAPI, verifier: TokenVerifier) -> None:
    """Gives the app's routes the verifier their dependencies use."""
    app.state.token_verifier = verifier


def _unauthorized(detail: str, error: str | None = None) -> HTTPException:
    challenge = f'Bearer error="{error}"' if error else "Bearer"
    return HTTPException(401, detail=detail, headers={"WWW-Authenticate": challenge})


async def authenticated(request: Request, credentials: Annotated[
        HTTPAuthorizationCredentials | None, Security(bearer)]) -> Principal:
    if credentials is None:
        raise _unauthorized("a bearer token is required")
    verifier: TokenVerifier = request.app.state.token_verifier
    try:
        return await verifier.verify(credentials.credentials)
    except InvalidToken as exc:
        # The reason only: the token itself is a credential and is never logged.
        log.info("token refused: %s", exc, extra={"path": request.url.path})
        raise _unauthorized("invalid or expired token", "invalid_token") from None
    except IssuerUnavailable:
        raise HTTPException(503, detail="the identity provider's keys cannot be fetched; "
                                        "retry later",
                            headers={"Retry-After": "1"}) from None


def require(*roles: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency that lets through a valid token holding one of ``roles``."""
    allowed = frozenset(roles)

    async def authorized(principal: Annotated[Principal, Security(authenticated)]) -> Principal:
        if not principal.roles & allowed:
            raise HTTPException(403, detail=f"this needs the role {' or '.join(sorted(allowed))}",
                                headers={"WWW-Authenticate": 'Bearer error="insufficient_scope"'})
        return principal

    return authorized


require_operator = require(OPERATOR)
