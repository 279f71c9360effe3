"""A request body over HTTP_MAX_BODY_BYTES is refused with 413 as it arrives, before pedidos
reads it whole, parses it or looks at its token: FastAPI parses a body before it runs the
route's security dependencies, so without the limit anyone could make pedidos read and parse
megabytes of JSON without a token."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pedidos.app import create
from saga_contracts import sealing

LIMIT = 64 * 1024


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Any:
    _, public = sealing.new_key_pair("k1")
    monkeypatch.setenv("PEDIDOS_PAYMENT_TOKEN_SEAL_KEY", public)
    monkeypatch.setenv("PEDIDOS_FINGERPRINT_KEY", "k" * 32)
    monkeypatch.delenv("HTTP_MAX_BODY_BYTES", raising=False)
    return create()


async def _post(app: Any, body: bytes, *, declare_length: bool) -> tuple[int, int]:
    """(status, bytes the app pulled from the connection) for ``POST /orders`` with ``body``
    in 16 KiB chunks and no token."""
    chunks = [body[i:i + 16384] for i in range(0, len(body), 16384)]
    pulled = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if chunks:
            chunk = chunks.pop(0)
            pulled += len(chunk)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    status: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    headers = [(b"content-type", b"application/json")]
    if declare_length:
        headers.append((b"content-length", str(len(body)).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/orders", "raw_path": b"/orders",
             "query_string": b"", "headers": headers, "server": ("test", 80),
             "client": ("test", 1), "root_path": "", "state": {}}
    await asyncio.wait_for(app(scope, receive, send), 10)
    return status[0], pulled


def _json_of(size: int) -> bytes:
    line = b'{"sku":"A","quantity":1,"price":"1.00"},'
    return b'{"items":[' + line * (size // len(line)) + b'{}]}'


@pytest.mark.parametrize("declare_length", [True, False])
async def test_a_body_over_the_limit_gets_413_without_being_read_whole(
        app: Any, declare_length: bool) -> None:
    status, pulled = await _post(app, _json_of(1024 * 1024), declare_length=declare_length)
    assert status == 413
    assert pulled <= LIMIT + 16384, "the app read past the limit"


async def test_a_body_under_the_limit_reaches_authentication(app: Any) -> None:
    status, _ = await _post(app, _json_of(8 * 1024), declare_length=True)
    assert status == 401
