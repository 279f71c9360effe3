"""Who is signed in, and the forms they may post.

The session is a cookie signed with ``CONSOLA_SESSION_SECRET`` (Starlette's
``SessionMiddleware``: HttpOnly, SameSite=Lax, ``Secure`` with ``CONSOLA_SECURE_COOKIE`` or an
https public URL). It holds the operator's access token encrypted (Fernet, under a key derived
from the same secret): the cookie is readable by whoever gets it (browsers send a cookie of
127.0.0.1 to every port of it), and a copied cookie must be no more than a console session, never
a token for the services' APIs. Every page verifies the token as the services do (issuer,
audience, signature against the issuer's JWKS, expiry) before it is used: a token that expired
or that the issuer no longer vouches for sends the operator to sign in again. Lax, not Strict:
the issuer's redirect back to ``/auth/callback`` is a navigation from another origin, and must
carry the cookie that holds the sign-in's state and PKCE verifier.

Every form POST carries the session's CSRF token (a synchronizer token: random per session,
compared in constant time); a POST without it, or with another session's, is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Annotated

from cryptography.fernet import Fernet
from cryptography.fernet import InvalidToken as UnreadableToken
from fastapi import Depends, Form, Request

from sagakit.auth import InvalidToken, IssuerUnavailable, TokenVerifier

TOKEN, SUBJECT, CSRF = "token", "subject", "csrf"


class SignInNeeded(Exception):
    """No session, or its token is no longer good: the operator signs in (again)."""


class NotAnOperator(Exception):
    def __init__(self, subject: str, roles: frozenset[str]) -> None:
        super().__init__(subject)
        self.subject = subject
        self.roles = roles


class IssuerDown(Exception):
    """The issuer's keys could not be fetched: no token can be verified now."""


class CsrfRefused(Exception):
    """A form POST without this session's CSRF token."""


@dataclass(frozen=True)
class Operator:
    subject: str
    token: str
    csrf: str


def token_box(session_secret: str) -> Fernet:
    """What seals the token in the cookie: a key of its own, derived from the cookie's."""
    key = hashlib.sha256(b"consola session token\x00" + session_secret.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def _box(request: Request) -> Fernet:
    box: Fernet = request.app.state.token_box
    return box


def start_session(request: Request, subject: str, token: str) -> None:
    """A new session for a signed-in operator: nothing of the one before it is kept (its
    sign-in state, its CSRF token)."""
    request.session.clear()
    request.session.update({TOKEN: _box(request).encrypt(token.encode()).decode(),
                            SUBJECT: subject, CSRF: secrets.token_urlsafe(32)})


def verifier_of(request: Request) -> TokenVerifier:
    verifier: TokenVerifier = request.app.state.verifier
    return verifier


async def signed_in_operator(request: Request) -> Operator:
    sealed = request.session.get(TOKEN)
    if not isinstance(sealed, str):
        raise SignInNeeded
    try:
        token = _box(request).decrypt(sealed.encode()).decode()
    except UnreadableToken:
        request.session.clear()
        raise SignInNeeded from None
    try:
        principal = await verifier_of(request).verify(token)
    except InvalidToken:
        request.session.clear()
        raise SignInNeeded from None
    except IssuerUnavailable:
        raise IssuerDown from None
    if not principal.is_operator:
        request.session.clear()
        raise NotAnOperator(principal.subject, principal.roles)
    return Operator(principal.subject, token, str(request.session.get(CSRF, "")))


SignedIn = Annotated[Operator, Depends(signed_in_operator)]


async def csrf_checked(operator: SignedIn,
                       csrf_token: Annotated[str, Form(max_length=200)] = "") -> Operator:
    if not operator.csrf or not hmac.compare_digest(csrf_token.encode(), operator.csrf.encode()):
        raise CsrfRefused
    return operator


FormPoster = Annotated[Operator, Depends(csrf_checked)]


def safe_next(path: str | None) -> str:
    """Where to go after signing in: a path of this console only (never ``//host``)."""
    if (path and path.startswith("/") and not path.startswith("//") and "\\" not in path
            and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in path)):
        return path
    return "/"
