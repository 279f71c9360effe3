"""The registry client against a socket that misbehaves as the TCP proxy's faults do: one that
never answers costs the timeout and no more, garbage and errors are "unavailable" (never "the
registry does not hold it"), a 404 is an answer; the reader's password never shows in what it
raises."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from sagakit.schema_registry import RegistryClient, RegistryUnavailable, SchemaRegistrySettings

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(answer: Answer) -> AsyncIterator[str]:
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/apis/registry/v3"
    finally:
        server.close()


def _client(url: str) -> RegistryClient:
    return RegistryClient(SchemaRegistrySettings(url=url, username="reader",
                                                 password="s3cret-pw", timeout_s=0.3))


def _http(status: str, body: bytes) -> Answer:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()
    return answer


async def _hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(30)


@pytest.fixture
async def hung() -> AsyncIterator[str]:
    async for url in _serve(_hang):
        yield url


async def test_a_registry_that_never_answers_costs_the_timeout(hung: str) -> None:
    client = _client(hung)
    started = time.monotonic()
    with pytest.raises(RegistryUnavailable) as unavailable:
        await client.document("OrdenCompletada", "1.0.0")
    assert time.monotonic() - started < 1.5
    assert "s3cret-pw" not in str(unavailable.value)
    await client.close()


@pytest.mark.parametrize(("status", "body"), [
    ("200 OK", b"<html>a proxy's page</html>"), ("200 OK", b"[1, 2]"),
    ("502 Bad Gateway", b"{}"), ("401 Unauthorized", b"{}")])
async def test_garbage_and_errors_are_unavailable_not_missing(status: str, body: bytes) -> None:
    async for url in _serve(_http(status, body)):
        client = _client(url)
        with pytest.raises(RegistryUnavailable):
            await client.document("OrdenCompletada", "1.0.0")
        await client.close()


async def test_a_404_is_an_answer_and_a_document_is_read() -> None:
    async for url in _serve(_http("404 Not Found", b'{"status": 404}')):
        client = _client(url)
        assert await client.document("OrdenCompletada", "9.0.0") is None
        assert await client.versions("OrdenCompletada_v9") is None
        await client.close()
    async for url in _serve(_http("200 OK", b'{"versions": [{"version": "1.0.0"}]}')):
        client = _client(url)
        assert await client.versions("OrdenCompletada") == ["1.0.0"]
        await client.close()


async def test_a_refused_connection_is_unavailable() -> None:
    urls = [url async for url in _serve(_hang)]
    client = _client(urls[0])  # closed: nothing listens there now
    with pytest.raises(RegistryUnavailable):
        await client.versions("OrdenCompletada")
    await client.close()
