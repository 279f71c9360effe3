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


@pytest.fixture
async def proxied_api() -> AsyncIterator[tuple[ProxySet, str, list[str]]]:
    """An HTTP API behind the proxy that answers JSON and notes the idempotency key of every
    request it received."""
    from aiohttp import web

    received: list[str] = []

    async def charge(request: web.Request) -> web.Response:
        await request.read()
        received.append(request.headers.get("Idempotency-Key", ""))
        return web.json_response({"id": f"ch_{len(received)}"})

    app = web.Application()
    app.router.add_post("/v1/charges", charge)
    runner = web.AppRunner(app)
    await runner.setup()
    target = _free_port()
    await web.TCPSite(runner, "127.0.0.1", target).start()
    port = _free_port()
    try:
        async with ProxySet({"api": (port, "127.0.0.1", target)}) as proxies:
            yield proxies, f"http://127.0.0.1:{port}", received
    finally:
        await runner.cleanup()


async def _call(session, base: str, key: str) -> tuple[int, bytes]:  # type: ignore[no-untyped-def]
    async with session.post(f"{base}/v1/charges", json={"amount": 100},
                            headers={"Idempotency-Key": key}) as resp:
        return resp.status, await resp.read()


async def test_an_html_reply_replaces_the_answer_of_a_forwarded_request(
        proxied_api: tuple[ProxySet, str, list[str]]) -> None:
    import aiohttp

    proxies, base, received = proxied_api
    async with aiohttp.ClientSession() as session:
        assert (await _call(session, base, "k1"))[0] == 200
        # The same keep-alive connection: the fault applies from the next request on.
        proxies["api"].set(html_share=1.0)
        status, body = await _call(session, base, "k2")
        assert status == 200 and body.startswith(b"<!DOCTYPE html>")
        assert received == ["k1", "k2"], "the request went through: its effect may be real"
        proxies["api"].clear()
        status, body = await _call(session, base, "k3")
        assert (status, body) == (200, b'{"id": "ch_3"}')
    assert [(g.kind, g.idempotency_key) for g in proxies["api"].garbled] == [("html", "k2")]


async def test_garbage_is_answered_without_forwarding(
        proxied_api: tuple[ProxySet, str, list[str]]) -> None:
    import json

    import aiohttp

    proxies, base, received = proxied_api
    proxies["api"].set(garbage_share=1.0)
    async with aiohttp.ClientSession() as session:
        status, body = await _call(session, base, "k1")
    assert status == 200 and received == []
    with pytest.raises(ValueError):
        json.loads(body)
    assert [(g.kind, g.idempotency_key) for g in proxies["api"].garbled] == [("garbage", "k1")]


async def test_reply_faults_hit_a_share_of_the_calls(
        proxied_api: tuple[ProxySet, str, list[str]]) -> None:
    import aiohttp

    proxies, base, _ = proxied_api
    proxies["api"].set(html_share=0.25, garbage_share=0.25)
    async with aiohttp.ClientSession() as session:
        answers = [await _call(session, base, f"k{i}") for i in range(200)]
    clean = sum(body.startswith(b'{"id"') for _, body in answers)
    assert 60 <= clean <= 140, clean
    assert len(proxies["api"].garbled) == 200 - clean


def test_every_instance_has_routes_of_its_own_to_every_broker() -> None:
    from netproxy import layout

    routes = layout.stack_routes(25432, 8010, replicas=2, brokers=3)
    # Instance 1 keeps the ports of a one-instance, one-broker stack.
    assert routes["pedidos-postgres"] == (15411, "127.0.0.1", 25432)
    assert routes["pedidos-kafka"] == (15412, "127.0.0.1", 9094)
    assert routes["pagos-gateway"] == (15433, "127.0.0.1", 8010)
    assert routes["pedidos-2-postgres"][0] == 15511
    assert routes["inventario-2-kafka-3"] == (15525, "127.0.0.1", 9305)
    assert len({port for port, _, _ in routes.values()}) == len(routes) == 2 * (3 * 4 + 1)
    assert layout.instance_routes("pedidos-2", "kafka", brokers=3) == [
        "pedidos-2-kafka", "pedidos-2-kafka-2", "pedidos-2-kafka-3"]
    assert set(layout.instance_routes("pagos-2", "gateway")) <= set(routes)
    # Each broker advertises every instance's listener at that instance's route to it.
    assert ("PROXIED_PAGOS_2", 9206, 15534) in layout.kafka_listeners(broker=2, replicas=2)
    assert layout.kafka_bootstrap("pagos", 2, 2) == "127.0.0.1:15532,127.0.0.1:15534"


@pytest.mark.parametrize("service", ["pedidos", "inventario", "pagos"])
def test_a_service_s_routes_are_every_dependency_it_reaches_through_the_proxy(
        service: str) -> None:
    from netproxy import layout

    def route(dependency: str, target: int, broker: int = 1) -> tuple[int, str, int]:
        return layout.route_port(service, dependency, 2, broker), "127.0.0.1", target

    part = f"{service}-2"
    expected = {f"{part}-postgres": route("postgres", 25432),
                f"{part}-registry": route("registry", 8081),
                **{layout.route_name(service, "kafka", 2, b): route(
                    "kafka", layout.kafka_listener_port(service, 2, b), b) for b in (1, 2, 3)}}
    if service == "pagos":
        expected[f"{part}-gateway"] = route("gateway", 8010)
    assert layout.service_routes(service, 25432, 8010, 8081, instance=2, brokers=3) == expected
    # What the proxy serves for the whole stack (netproxy.control) is every instance's set.
    every = {name: r for svc in layout.SERVICES for k in (1, 2)
             for name, r in layout.service_routes(svc, 25432, 8010, 8081, k, 3).items()}
    assert every == {**layout.stack_routes(25432, 8010, 2, 3), **layout.registry_routes(8081, 2)}
