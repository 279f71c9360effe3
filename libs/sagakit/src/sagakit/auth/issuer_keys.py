"""The issuer's signing keys: found through its OIDC discovery document (``jwks_uri``), fetched
with an async client (never blocking the event loop), cached by key id.

The keys decide who is an operator, so they are fetched only from the issuer's own origin (the
scheme, host and port of ``AUTH_ISSUER``, which is https but for the loopback or a development
network named so, ``AuthSettings``): a discovery document that sends the service elsewhere for
them, or to plain HTTP, is not believed.

They are fetched again when they are older than ``keys_max_age_s`` (a key the issuer withdrew
stops being believed) and when a token names a key id not among them (the issuer rotated its
key), the latter at most once in ``unknown_key_refetch_s``: a flood of tokens with made-up key
ids costs the issuer one request per interval, and each of them is refused. Requests waiting
for the same fetch share it.

When a fetch fails, the keys fetched before stay in use; with none at all, the caller learns
that the issuer is unavailable (a 503, not a 401: the token may well be good).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from sagakit.auth.settings import AuthSettings

log = logging.getLogger("sagakit.auth")

# Key types that sign asymmetrically; an "oct" key in a JWKS is a shared secret published to
# the world, and is never used.
_PUBLIC_KEY_TYPES = frozenset({"RSA", "EC", "OKP"})
# After a failed fetch, the next one waits at least this long (an issuer that is down is not
# asked again for every request).
_RETRY_AFTER_FAILURE_S = 1.0


class IssuerUnavailable(Exception):
    """The issuer's keys could not be fetched, and none fetched before are at hand."""


JsonKey = dict[str, Any]

_DEFAULT_PORTS = {"https": 443, "http": 80}


def origin(url: str) -> tuple[str, str, int]:
    """``url``'s origin (RFC 6454): scheme, host and port, the default port spelled out."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{url!r} has no valid port") from None
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme, 0)


def check_jwks_uri(jwks_uri: str, issuer: str) -> None:
    """Raises ``ValueError`` unless ``jwks_uri`` is at the issuer's origin: the issuer's own
    scheme (https, but for the stand-ins ``AuthSettings`` allows in plain HTTP), host and
    port, and names no user."""
    found = origin(jwks_uri)
    if found[0] not in _DEFAULT_PORTS or urlsplit(jwks_uri).username is not None:
        raise ValueError("the discovery document's jwks_uri is not an http(s) URL")
    if found != origin(issuer):
        raise ValueError("the discovery document's jwks_uri is not at the issuer's origin "
                         f"({found[0]}://{found[1]}:{found[2]})")


def usable_keys(jwks: Mapping[str, Any]) -> dict[str | None, JsonKey]:
    """The JWKS's signing keys by key id (a key without one under None)."""
    keys = jwks.get("keys")
    if not isinstance(keys, list):
        raise ValueError("the JWKS has no list of keys")
    found: dict[str | None, JsonKey] = {}
    for key in keys:
        if (isinstance(key, dict) and key.get("kty") in _PUBLIC_KEY_TYPES
                and key.get("use", "sig") == "sig" and "d" not in key):
            kid = key.get("kid")
            if kid is None or isinstance(kid, str):
                found[kid] = key
    return found


class IssuerKeys:
    def __init__(self, settings: AuthSettings, client: httpx.AsyncClient | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._client = client
        self._owns_client = client is None
        self._clock = clock
        self._keys: dict[str | None, JsonKey] = {}
        self._fetched_at: float | None = None
        self._next_unknown_fetch_at = float("-inf")
        self._next_attempt_at = float("-inf")
        self._fetches = 0
        self._generation = 0
        self._lock = asyncio.Lock()

    @property
    def fetches(self) -> int:
        """Fetches attempted so far (a test counts what a flood of unknown key ids cost)."""
        return self._fetches

    async def prefetch(self) -> None:
        """Fetches the keys now, if nothing did yet; a failure is logged, and the first request
        that needs them tries again."""
        if self._fetched_at is None:
            await self._refresh(self._generation)

    async def key(self, kid: str | None) -> JsonKey | None:
        """The issuer's key ``kid``, or None when the issuer does not publish it (after one
        fetch, if the rate limit allows it). Raises ``IssuerUnavailable`` when no key could
        ever be fetched."""
        if self._fetched_at is None or self._clock() - self._fetched_at >= self._settings.keys_max_age_s:
            await self._refresh(self._generation)
            if self._fetched_at is None:
                raise IssuerUnavailable(self._settings.issuer)
        key = self._keys.get(kid)
        if key is not None:
            return key
        seen = self._generation
        if self._lock.locked():
            # A fetch is under way, and may bring this key: wait for it, without another.
            await self._refresh(seen, fetch=False)
        elif self._clock() >= self._next_unknown_fetch_at:
            self._next_unknown_fetch_at = self._clock() + self._settings.unknown_key_refetch_s
            await self._refresh(seen)
        return self._keys.get(kid)

    async def _refresh(self, seen: int, fetch: bool = True) -> None:
        """Fetches the keys, unless a fetch ended since the caller looked (``seen``: its
        generation then), which then stands for this one."""
        async with self._lock:
            if not fetch or self._generation != seen or self._clock() < self._next_attempt_at:
                return
            self._fetches += 1
            try:
                keys = await self._fetch()
            except (httpx.HTTPError, ValueError) as exc:
                self._next_attempt_at = self._clock() + _RETRY_AFTER_FAILURE_S
                log.warning("could not fetch the keys of issuer %s (%s); %s",
                            self._settings.issuer, exc,
                            "keeping the ones fetched before" if self._keys else "no key yet")
                return
            finally:
                self._generation += 1
            self._keys = keys
            self._fetched_at = self._clock()
            log.info("fetched %d signing keys of issuer %s", len(keys), self._settings.issuer)

    async def _fetch(self) -> dict[str | None, JsonKey]:
        client = self._http()
        discovery = await self._json(client, self._settings.discovery_url)
        # OIDC Discovery §4.3: the document must name the issuer it was fetched for, or an
        # issuer could pass off another's keys.
        if discovery.get("issuer") != self._settings.issuer:
            raise ValueError(f"the discovery document names issuer {discovery.get('issuer')!r}")
        jwks_uri = discovery.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise ValueError("the discovery document has no jwks_uri")
        check_jwks_uri(jwks_uri, self._settings.issuer)
        return usable_keys(await self._json(client, jwks_uri))

    @staticmethod
    async def _json(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
        response = await client.get(url, headers={"Accept": "application/json"})
        response.raise_for_status()
        document = response.json()
        if not isinstance(document, dict):
            raise ValueError(f"{url} did not answer a JSON object")
        return document

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._settings.fetch_timeout_s,
                                             follow_redirects=False)
        return self._client

    async def close(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
