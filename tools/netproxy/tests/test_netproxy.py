"""The TCP proxy does what its faults say, against a local echo server."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import pytest

from netproxy.proxy import ProxySet


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def proxied_echo() -> AsyncIterator[tuple[ProxySet, int]]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    target = server.sockets[0].getsockname()[1]
    port = _free_port()
    async with server, ProxySet({"echo": (port, "127.0.0.1", target)}) as proxies:
        yield proxies, port


async def _round_trip(port: int, payload: bytes = b"ping") -> tuple[bytes, float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        started = time.monotonic()
        writer.write(payload)
        await writer.drain()
        data = await reader.readexactly(len(payload))
        return data, time.monotonic() - started
    finally:
        writer.close()


async def test_passes_bytes_through_unchanged(proxied_echo: tuple[ProxySet, int]) -> None:
    _, port = proxied_echo
    payload = bytes(range(256)) * 1000
    data, _ = await _round_trip(port, payload)
    assert data == payload


async def test_latency_delays_every_round_trip_and_keeps_order(
        proxied_echo: tuple[ProxySet, int]) -> None:
    proxies, port = proxied_echo
    proxies["echo"].set(latency_s=0.3)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    for i in range(3):
        writer.write(f"{i}".encode())
        await writer.drain()
        assert await reader.readexactly(1) == f"{i}".encode()
    elapsed = time.monotonic() - started
    writer.close()
    assert elapsed >= 0.9, elapsed
    proxies["echo"].clear()
    _, fast = await _round_trip(port)
    assert fast < 0.3


async def test_black_hole_holds_bytes_until_it_closes(proxied_echo: tuple[ProxySet, int]) -> None:
    proxies, port = proxied_echo
    proxies["echo"].set(blackhole=True)
    trip = asyncio.create_task(_round_trip(port))
    done, _ = await asyncio.wait({trip}, timeout=0.5)
    assert not done, "bytes crossed a black hole"
    proxies["echo"].clear()
    data, _ = await asyncio.wait_for(trip, 5)
    assert data == b"ping"


async def test_reset_breaks_open_connections_and_refuse_new_ones(
        proxied_echo: tuple[ProxySet, int]) -> None:
    proxies, port = proxied_echo
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"x")
    await writer.drain()
    assert await reader.readexactly(1) == b"x"
    assert proxies["echo"].reset_connections() == 1
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(reader.readexactly(1), 5)
    writer.close()

    proxies["echo"].set(refuse=True)
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(_round_trip(port), 5)
    proxies["echo"].clear()
    assert (await _round_trip(port))[0] == b"ping"


async def test_control_api_sets_and_clears_faults(proxied_echo: tuple[ProxySet, int]) -> None:
    import httpx

    from netproxy.control import _control_app

    proxies, _ = proxied_echo
    transport = httpx.ASGITransport(app=_control_app(proxies))
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
        r = await http.put("/routes/echo", json={"latency_s": 1.5, "blackhole": True})
        assert r.status_code == 200 and r.json()["latency_s"] == 1.5 and r.json()["blackhole"]
        assert proxies["echo"].faults.latency_s == 1.5
        assert (await http.put("/routes/echo", json={"latency_s": -1})).status_code == 422
        assert (await http.put("/routes/nope", json={"refuse": True})).status_code == 404
        assert (await http.delete("/faults")).status_code == 200
        assert proxies["echo"].faults == type(proxies["echo"].faults)()
