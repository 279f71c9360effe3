"""The quiet uvicorn main loop: one tick a second that still refreshes the Date header, and a
shutdown signal that ends the loop at once instead of at the next tick."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest
import uvicorn

from sagakit.runtime import http_server
from sagakit.runtime.app import http_server_options
from sagakit.runtime.settings import ServiceSettings


async def _app(scope: object, receive: object, send: object) -> None:  # pragma: no cover
    raise AssertionError("no request is made")


def _server(ticks: list[int], stop_after: int | None = None,
            ticked: asyncio.Event | None = None) -> http_server.QuietServer:
    server = http_server.QuietServer(uvicorn.Config(_app))

    async def on_tick(counter: int) -> bool:
        ticks.append(counter)
        if ticked is not None:
            ticked.set()
        return server.should_exit or (stop_after is not None and len(ticks) >= stop_after)

    server.on_tick = on_tick  # type: ignore[method-assign]
    return server


async def test_every_tick_is_one_that_refreshes_the_date_header(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_server, "TICK_S", 0.01)
    ticks: list[int] = []
    await asyncio.wait_for(_server(ticks, stop_after=4).main_loop(), 10)
    # uvicorn refreshes the Date header on ticks divisible by 10 (tenths of a second).
    assert ticks == [0, 10, 20, 30]


async def test_a_shutdown_signal_ends_the_loop_without_waiting_for_the_next_tick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_server, "TICK_S", 3600.0)
    ticks: list[int] = []
    ticked = asyncio.Event()
    server = _server(ticks, ticked=ticked)
    loop_task = asyncio.create_task(server.main_loop())
    await asyncio.wait_for(ticked.wait(), 10)
    server.handle_exit(signal.SIGTERM, None)
    await asyncio.wait_for(loop_task, 10)  # an hour without the wake-up
    assert server.should_exit
    assert ticks == [0, 10]


async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def _serving(server: uvicorn.Server) -> asyncio.Task[None]:
    task = asyncio.create_task(server.serve())
    deadline = asyncio.get_running_loop().time() + 10
    while not server.started:
        assert asyncio.get_running_loop().time() < deadline, "the server did not start"
        await asyncio.sleep(0.01)
    return task


async def _closed(reader: asyncio.StreamReader, within_s: float) -> bool:
    """Whether the server closed the connection within ``within_s`` (the read sees its end)."""
    try:
        return await asyncio.wait_for(reader.read(), within_s) == b""
    except TimeoutError:
        return False


async def test_a_client_that_sends_its_headers_slowly_is_cut_off(
        unused_tcp_port: int) -> None:
    """A slowloris: headers begun and never finished held the connection for ever."""
    options = http_server_options(ServiceSettings(
        DATABASE_URL="postgresql+asyncpg://x@h/d", HTTP_PORT=unused_tcp_port,
        HTTP_HEADER_TIMEOUT_S=0.5))
    options.pop("log_config")
    server = http_server.QuietServer(http_server.config(_ok, **options))
    serving = await _serving(server)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", unused_tcp_port)
        writer.write(b"GET /ready HTTP/1.1\r\nHost: x\r\n")
        await writer.drain()
        assert await _closed(reader, 10)
        writer.close()
        # A connection that sends nothing at all is cut off the same way.
        reader, writer = await asyncio.open_connection("127.0.0.1", unused_tcp_port)
        assert await _closed(reader, 10)
        writer.close()
        # A request whose headers arrive in time is served, and its keep-alive connection
        # then waits for the next request under the keep-alive timeout, not the header one.
        reader, writer = await asyncio.open_connection("127.0.0.1", unused_tcp_port)
        writer.write(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await asyncio.wait_for(reader.readuntil(b"ok"), 10)).startswith(
            b"HTTP/1.1 200")
        assert not await _closed(reader, 1.0)
        writer.close()
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)


def test_the_server_is_run_with_a_concurrency_limit_and_a_header_timeout() -> None:
    options = http_server_options(ServiceSettings(
        DATABASE_URL="postgresql+asyncpg://x@h/d", HTTP_LIMIT_CONCURRENCY=7,
        HTTP_HEADER_TIMEOUT_S=3))
    config = http_server.config(_ok, **options)
    assert config.limit_concurrency == 7
    assert issubclass(config.http, http_server.HeaderTimeoutProtocol)  # type: ignore[arg-type]
    assert config.http.header_timeout_s == 3  # type: ignore[union-attr]
