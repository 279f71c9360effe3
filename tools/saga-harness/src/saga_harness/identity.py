"""Tokens from the stack's identity provider, for the tests and tools that call the services as
their users would: a customer (its id the token's subject) or an operator.

``StackAuth`` authenticates every request of an httpx client it is given to: a new order as the
customer its body names, anything else as an operator (who may read and cancel any saga, set
stock and read /metrics); a request that carries its own ``Authorization`` is left as it is.
Tokens are reused until a minute before they expire. They come from the local stack's identity
provider, or from the one at ``issuer`` (``StackAuth(issuer="http://...")``: the compose stack's).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections.abc import AsyncGenerator, Generator

import httpx

from local_stack.identity import new_token

OPERATOR = "harness-operator"
# The customer of an order whose body names none that could be a token's subject (a test of
# a body that is refused anyway).
ANY_CUSTOMER = "cust-harness"
_LIFETIME_S = 3600
_RENEW_BEFORE_S = 60

_cache: dict[tuple[str, tuple[str, ...], str | None], tuple[str, float]] = {}
_lock = threading.Lock()


def token(sub: str, roles: tuple[str, ...], issuer: str | None = None) -> str:
    """A token for ``sub`` with ``roles``, from the local stack's identity provider or the one at
    ``issuer`` (reused while valid)."""
    key = (sub, roles, issuer)
    with _lock:
        cached = _cache.get(key)
        if cached and cached[1] > time.monotonic():
            return cached[0]
    fresh = (new_token(sub, list(roles), _LIFETIME_S) if issuer is None
             else _token_from(issuer, sub, roles))
    with _lock:
        _cache[key] = (fresh, time.monotonic() + _LIFETIME_S - _RENEW_BEFORE_S)
    return fresh


def _token_from(issuer: str, sub: str, roles: tuple[str, ...]) -> str:
    body = json.dumps({"sub": sub, "roles": list(roles), "expires_in": _LIFETIME_S}).encode()
    request = urllib.request.Request(f"{issuer}/token", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return str(json.loads(response.read())["access_token"])


def operator_token(issuer: str | None = None) -> str:
    return token(OPERATOR, ("operator",), issuer)


def customer_token(customer_id: str, issuer: str | None = None) -> str:
    return token(customer_id, ("customer",), issuer)


def bearer(token_text: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_text}"}


def operator_headers() -> dict[str, str]:
    return bearer(operator_token())


def customer_of_order(body: bytes) -> str:
    """The customer a new order's body names, if it could be a token's subject."""
    try:
        customer = json.loads(body).get("customer_id")
    except (ValueError, AttributeError):
        return ANY_CUSTOMER
    if isinstance(customer, str) and 0 < len(customer) <= 100 and "\x00" not in customer \
            and customer.isprintable() and _utf8(customer):
        return customer
    return ANY_CUSTOMER


def _utf8(text: str) -> bool:
    """False for text with a lone surrogate (valid JSON, not valid UTF-8): no token names it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def token_for(method: str, path: str, body: bytes, issuer: str | None = None) -> str:
    if method == "POST" and path.rstrip("/") == "/orders":
        return customer_token(customer_of_order(body), issuer)
    return operator_token(issuer)


class StackAuth(httpx.Auth):
    requires_request_body = True

    def __init__(self, issuer: str | None = None) -> None:
        self.issuer = issuer

    def sync_auth_flow(self, request: httpx.Request
                       ) -> Generator[httpx.Request, httpx.Response, None]:
        if "Authorization" not in request.headers:
            request.headers["Authorization"] = "Bearer " + token_for(
                request.method, request.url.path, request.content, self.issuer)
        yield request

    async def async_auth_flow(self, request: httpx.Request
                              ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if "Authorization" not in request.headers:
            # The first token of a subject is a blocking request to the identity provider.
            found = await asyncio.to_thread(token_for, request.method, request.url.path,
                                            request.content, self.issuer)
            request.headers["Authorization"] = f"Bearer {found}"
        yield request
