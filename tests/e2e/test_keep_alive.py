"""A service keeps an idle keep-alive connection open longer than its clients do.

When a client and a server give an idle connection up after the same time (httpx and uvicorn
both after 5 s), the client may write a request just as the server closes the connection, and
the request is lost: "server disconnected without sending a response" (the broker-outage test
hit it when Kafka's restart left the test's connections idle for about 5 s).
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import httpx

from saga_harness import config

CLIENT_KEEPS_S = httpx.Limits().keepalive_expiry or 5.0  # the longest a test's client keeps one


async def _get_health(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    writer.write(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    await asyncio.wait_for(reader.readexactly(length), 5)
    return head.split(b"\r\n", 1)[0]


async def _still_open_after_idle(base_url: str) -> tuple[bool, bytes]:
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        assert (await _get_health(reader, writer)).endswith(b"200 OK")
        idle_until = time.monotonic() + CLIENT_KEEPS_S + 1
        try:  # an end of stream before the deadline is the server closing the connection
            closed = await asyncio.wait_for(reader.read(1), idle_until - time.monotonic()) == b""
        except TimeoutError:
            closed = False
        if closed:
            return False, b""
        return True, await _get_health(reader, writer)
    finally:
        writer.close()


async def test_every_server_keeps_an_idle_connection_longer_than_its_clients(
        running_stack: None) -> None:
    results = await asyncio.gather(*(_still_open_after_idle(url) for url in
                                     (config.PEDIDOS, config.INVENTARIO, config.PAGOS,
                                      config.GATEWAY)))
    assert [open_ for open_, _ in results] == [True] * 4, \
        "a service closed an idle connection before its client would have"
    assert all(status.endswith(b"200 OK") for _, status in results)
