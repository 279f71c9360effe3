"""The authorization-code grant with PKCE (RFC 6749 §4.1, RFC 7636), as a browser sign-in to a
real issuer goes: the client sends the browser to ``/authorize`` with a ``code_challenge``; the
person signs in; the browser comes back to the client's ``redirect_uri`` with a one-time
``code``; the client trades it at ``/token`` (form-encoded) for a token, proving with its
``code_verifier`` that it is the client that asked.

Only ``S256`` is accepted (``plain`` would send the secret through the browser), a code is good
once and for a minute, and it is bound to the client, the redirect URI and the challenge it was
asked with. Codes live in the process's memory: a restart of the provider voids the sign-ins in
flight, which start again.

Which redirect URIs a client may name: those configured (``IDENTITY_REDIRECT_URIS``), or, when
none is, any ``http`` URI on a loopback host, as RFC 8252 §7.3 allows native and local clients:
the provider stays a local stand-in that never sends a browser (and a code) off the machine.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

Role = Literal["customer", "operator"]
ROLES: tuple[Role, ...] = ("customer", "operator")

CODE_LIFETIME_S = 60
# A bound on sign-ins begun and never finished, kept until their code expires.
MAX_PENDING_CODES = 10_000
# RFC 7636 §4.1: 43 to 128 characters of the unreserved set; a S256 challenge is 43.
_VERIFIER_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class AuthorizationError(Exception):
    """An OAuth error (RFC 6749 §4.1.2.1, §5.2): ``error`` is its code, the message its
    description."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


@dataclass(frozen=True)
class AuthorizationRequest:
    """What a client asked ``/authorize`` for, once checked."""

    client_id: str
    redirect_uri: str
    code_challenge: str
    state: str | None = None
    scope: str | None = None


@dataclass(frozen=True)
class Grant:
    """What a code stands for: who signed in, for which request, until when."""

    request: AuthorizationRequest
    subject: str
    roles: tuple[Role, ...]
    expires_at: float


def s256(verifier: str) -> str:
    """RFC 7636 §4.2: BASE64URL(SHA256(ASCII(code_verifier))), unpadded."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


# The longest client_id, state or scope a request may carry: a pending sign-in is kept in
# memory until its code is redeemed or expires.
MAX_PARAMETER_CHARS = 512


def redirect_uri_allowed(uri: str, registered: Sequence[str]) -> bool:
    if registered:
        return uri in registered
    parts = urlsplit(uri)
    # No user-info part (``http://evil@127.0.0.1/``) nor backslash: what a browser makes of
    # those is not always what urlsplit does.
    return (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS and not parts.fragment
            and parts.username is None and parts.password is None and "\\" not in uri)


def check_request(*, response_type: str | None, client_id: str | None,
                  redirect_uri: str | None, code_challenge: str | None,
                  code_challenge_method: str | None, state: str | None, scope: str | None,
                  registered_uris: Sequence[str]) -> AuthorizationRequest:
    """The request, or an ``AuthorizationError``. The redirect URI is checked first: until it
    is known to be the client's, no error may be sent to it (RFC 6749 §4.1.2.1)."""
    if not client_id:
        raise AuthorizationError("invalid_request", "client_id is required")
    if len(client_id) > MAX_PARAMETER_CHARS:
        raise AuthorizationError("invalid_request", "client_id is too long")
    if not redirect_uri or not redirect_uri_allowed(redirect_uri, registered_uris):
        raise AuthorizationError("invalid_request",
                                 "redirect_uri is missing or not one this provider sends to")
    if response_type != "code":
        raise AuthorizationError("unsupported_response_type", "response_type must be code")
    if any(v is not None and len(v) > MAX_PARAMETER_CHARS for v in (state, scope)):
        raise AuthorizationError("invalid_request",
                                 f"state and scope are at most {MAX_PARAMETER_CHARS} characters")
    if code_challenge_method != "S256":
        raise AuthorizationError("invalid_request", "code_challenge_method must be S256 (PKCE)")
    if not code_challenge or len(code_challenge) != 43 or not set(code_challenge) <= _VERIFIER_CHARS:
        raise AuthorizationError("invalid_request", "code_challenge must be a S256 challenge")
    return AuthorizationRequest(client_id, redirect_uri, code_challenge, state, scope)


@dataclass
class CodeStore:
    """The codes handed out and not yet redeemed, in memory."""

    clock: Callable[[], float] = time.monotonic
    _grants: dict[str, Grant] = field(default_factory=dict)

    def issue(self, request: AuthorizationRequest, subject: str, roles: Sequence[Role]) -> str:
        now = self.clock()
        for code in [c for c, g in self._grants.items() if g.expires_at <= now]:
            del self._grants[code]
        if len(self._grants) >= MAX_PENDING_CODES:
            raise AuthorizationError("temporarily_unavailable",
                                     "too many sign-ins in progress; try again in a minute")
        code = secrets.token_urlsafe(32)
        self._grants[code] = Grant(request, subject, tuple(roles), now + CODE_LIFETIME_S)
        return code

    def redeem(self, *, code: str | None, client_id: str | None, redirect_uri: str | None,
               code_verifier: str | None) -> Grant:
        """The grant, once: a code presented again, expired, or with another client,
        redirect URI or verifier is ``invalid_grant`` (and spent all the same: a code that
        leaked is not tried twice)."""
        if not code:
            raise AuthorizationError("invalid_request", "code is required")
        if not code_verifier or not 43 <= len(code_verifier) <= 128 \
                or not set(code_verifier) <= _VERIFIER_CHARS:
            raise AuthorizationError("invalid_request",
                                     "code_verifier is required: 43 to 128 unreserved characters")
        grant = self._grants.pop(code, None)
        if grant is None or grant.expires_at <= self.clock():
            raise AuthorizationError("invalid_grant", "the code is unknown, used or expired")
        if client_id != grant.request.client_id or redirect_uri != grant.request.redirect_uri:
            raise AuthorizationError("invalid_grant",
                                     "the code was issued to another client or redirect_uri")
        if not hmac.compare_digest(s256(code_verifier), grant.request.code_challenge):
            raise AuthorizationError("invalid_grant", "code_verifier does not match the challenge")
        return grant
