"""Keyed fingerprints (HMAC-SHA-256 with ``PEDIDOS_FINGERPRINT_KEY``) of what pedidos must
recognise again without keeping it: an order's payment token, and a request.

- ``card``: the same payment token gives the same fingerprint, whoever places the order; it is
  what the decline limit per card counts (``pedidos.usecases.decline_velocity``). Card tokens
  are few and guessable (a test card's, a leaked list), so a bare hash of one could be matched
  by whoever reads the database; keyed, it cannot without the key.
- ``request``: the Idempotency-Key's ``request_hash``, of the request's body with its payment
  token replaced by the token's fingerprint, so that the clear token goes into no hash at all.

``legacy_request`` is the bare SHA-256 of the body, clear token included, that orders placed
before kept (64 hex digits, no prefix): a request sent again under one of their keys is
recognised by it, and only by it, until those orders are past their Idempotency-Key's use.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

REQUEST_PREFIX = "hmac-sha256:"


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


class Fingerprints:
    def __init__(self, key: bytes) -> None:
        if not key:
            raise ValueError("a fingerprint key")
        self._key = key

    def _mac(self, purpose: bytes, data: bytes) -> str:
        # The purpose is part of the message: a card's fingerprint is never a request's.
        return hmac.new(self._key, purpose + b"\0" + data, hashlib.sha256).hexdigest()

    def card(self, token: str) -> str:
        return self._mac(b"card", token.encode())

    def request(self, body: dict[str, Any]) -> str:
        """``body`` is the request in JSON form, its payment token in the clear."""
        method = body["payment_method"]
        keyed = {**body, "payment_method": {**method, "token": self.card(method["token"])}}
        return REQUEST_PREFIX + self._mac(b"request", _canonical(keyed))

    def same_request(self, stored: str, body: dict[str, Any]) -> bool:
        """Whether ``stored`` (an order's ``request_hash``) is ``body``'s, keyed or legacy."""
        if stored.startswith(REQUEST_PREFIX):
            return hmac.compare_digest(stored, self.request(body))
        return hmac.compare_digest(stored, legacy_request(body))


def legacy_request(body: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(body)).hexdigest()
