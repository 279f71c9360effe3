"""The load generator's HTTP client (bench/http_client.py) against a small HTTP server of the
test's own: it keeps its connections, reports a refusal with its status, opens a new
connection when the server closes one, and never sends a POST twice when a connection fails
under it (a retried POST /orders would be a second order)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from bench.http_client import HttpStatusError, JsonClient


@dataclass
class Server:
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)


Reply = Callable[[bytes], bytes | None]  # the request's body → the raw answer, None to hang up


def answer(status: int, body: object, *, close: bool = False) -> bytes:
    payload = json.dumps(body).encode()
    return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n").encode() + payload


async def serve(reply: Reply) -> tuple[Server, asyncio.AbstractServer]:
    state = Server()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                body = await reader.readexactly(length)
                state.requests.append(body)
                raw = reply(body)
                if raw is None:
                    return
                writer.write(raw)
                await writer.drain()
                if b"Connection: close" in raw:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    return state, server


@pytest.fixture
async def echo() -> AsyncIterator[Server]:
    state, server = await serve(lambda body: answer(202, {"got": json.loads(body)}))
    async with server:
        yield state


async def test_sequential_requests_share_one_kept_connection(echo: Server) -> None:
    async with JsonClient(f"http://127.0.0.1:{echo.port}", connections=4) as http:
        for i in range(5):
            assert await http.post_json("/orders", {"n": i}) == {"got": {"n": i}}
    assert echo.connections == 1 and len(echo.requests) == 5


async def test_a_connection_idle_past_its_keep_alive_is_replaced(echo: Server) -> None:
    async with JsonClient(f"http://127.0.0.1:{echo.port}", connections=1,
                          keep_alive_s=0.05) as http:
        await http.post_json("/orders", {"n": 1})
        await asyncio.sleep(0.2)  # the idle time under test, not a wait for something
        await http.post_json("/orders", {"n": 2})
    assert echo.connections == 2


async def test_concurrent_requests_open_at_most_the_connections_allowed(echo: Server) -> None:
    async with JsonClient(f"http://127.0.0.1:{echo.port}", connections=3) as http:
        answers = await asyncio.gather(*(http.post_json("/orders", {"n": i}) for i in range(12)))
    assert sorted(a["got"]["n"] for a in answers) == list(range(12))
    assert 1 <= echo.connections <= 3


async def test_a_refusal_is_an_error_with_its_status() -> None:
    state, server = await serve(lambda body: answer(422, {"detail": [{"loc": ["body"]}]}))
    async with server, JsonClient(f"http://127.0.0.1:{state.port}", connections=1) as http:
        with pytest.raises(HttpStatusError) as refused:
            await http.post_json("/orders", {})
    assert refused.value.status == 422 and b"detail" in refused.value.body


async def test_a_connection_the_server_closes_is_not_used_again() -> None:
    state, server = await serve(lambda body: answer(202, {"ok": True}, close=True))
    async with server, JsonClient(f"http://127.0.0.1:{state.port}", connections=1) as http:
        for _ in range(3):
            assert await http.post_json("/orders", {}) == {"ok": True}
    assert state.connections == 3


async def test_a_connection_lost_mid_request_fails_that_request_once_without_a_retry() -> None:
    replies = iter([None, answer(202, {"ok": True})])
    state, server = await serve(lambda body: next(replies))
    async with server, JsonClient(f"http://127.0.0.1:{state.port}", connections=1) as http:
        with pytest.raises(OSError):
            await http.post_json("/orders", {"first": True})
        assert len(state.requests) == 1  # sent once, not again behind the caller's back
        assert await http.post_json("/orders", {"second": True}) == {"ok": True}
    assert state.connections == 2


async def test_no_answer_within_the_timeout_is_a_timeout() -> None:
    hang = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await hang.wait()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, JsonClient(f"http://127.0.0.1:{port}", connections=1,
                                  timeout_s=0.2) as http:
        with pytest.raises(TimeoutError):
            await http.post_json("/orders", {})
        hang.set()
