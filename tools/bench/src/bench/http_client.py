"""The load generator's HTTP/1.1 client: keep-alive connections to one host, JSON in and out.

The load generator shares the machine's two cores with the stack it measures, so whatever it
spends on an order is taken from the stack. aiohttp spent 0.67–0.86 ms of CPU an order at
saturation (a request, a response, its JSON), httpx 2.4: 5–6 % of what the whole stack spent
on a saga. This client does only what the benchmark needs of HTTP — a request written in one
piece to a connection it keeps, the response parsed by ``httptools`` (the parser uvicorn
uses) — and took 0.47 ms of CPU a saga where aiohttp took 0.88, measured back to back in the
open loop at 150 orders/s.

It speaks to the one host it was made for, never follows redirects, and a connection that
fails or closes takes the request it was carrying with it (an error for the caller to count,
never a silent retry: a ``POST /orders`` sent twice would be two orders).
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any
from urllib.parse import urlsplit

import httptools
import orjson

# What a request may fail with short of an answer: no answer in time, a connection that failed
# or closed under it, an answer that is not HTTP.
TRANSPORT_ERRORS = (TimeoutError, OSError, httptools.HttpParserError)


class HttpStatusError(Exception):
    """The server answered with a status of 400 or more."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body[:200]!r}")
        self.status = status
        self.body = body


class _Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._body: list[bytes] = []
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.reusable = True
        self.idle_since = 0.0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self._fail(exc or ConnectionResetError("the server closed the connection"))

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        waiter, self._waiter = self._waiter, None
        body, self._body = b"".join(self._body), []
        if not self._parser.should_keep_alive():
            self.reusable = False
        if waiter is not None and not waiter.done():
            waiter.set_result((self._parser.get_status_code(), body))

    def _fail(self, exc: BaseException) -> None:
        self.reusable = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None and self._waiter is None
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self._waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class JsonClient:
    """``async with JsonClient("http://127.0.0.1:8001", connections=200) as http:`` then
    ``await http.post_json("/orders", body)``."""

    def __init__(self, base_url: str, *, connections: int, timeout_s: float = 30.0,
                 keep_alive_s: float = 4.0) -> None:
        url = urlsplit(base_url)
        if url.scheme != "http" or url.hostname is None:
            raise ValueError(f"an http:// address is needed, not {base_url!r}")
        self._host, self._port = url.hostname, url.port or 80
        self._host_header = f"{self._host}:{self._port}"
        self._timeout_s = timeout_s
        # An idle connection is given up before the server would close it (uvicorn's default
        # is 5 s): a POST written as the server closes is lost, and it is never sent twice.
        self._keep_alive_s = keep_alive_s
        self._idle: collections.deque[_Connection] = collections.deque()
        self._slots = asyncio.Semaphore(connections)

    async def __aenter__(self) -> JsonClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        while self._idle:
            self._idle.popleft().close()

    async def _connection(self) -> _Connection:
        fresh_after = time.monotonic() - self._keep_alive_s
        while self._idle:
            conn = self._idle.pop()
            if (conn.reusable and conn.idle_since > fresh_after and conn.transport is not None
                    and not conn.transport.is_closing()):
                return conn
            conn.close()
        _, conn = await asyncio.get_running_loop().create_connection(
            _Connection, self._host, self._port)
        return conn

    async def post_json(self, path: str, body: Any, *, bearer: str | None = None) -> Any:
        """POSTs ``body`` as JSON, with ``Authorization: Bearer <bearer>`` if given; the
        decoded JSON answer. ``HttpStatusError`` for a status of 400 or more, ``TimeoutError``
        past the timeout, ``OSError`` for a connection that failed."""
        payload = orjson.dumps(body)
        authorization = f"Authorization: Bearer {bearer}\r\n" if bearer else ""
        request = (f"POST {path} HTTP/1.1\r\nHost: {self._host_header}\r\n{authorization}"
                   f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                   "\r\n").encode() + payload
        async with self._slots:
            conn = await self._connection()
            try:
                async with asyncio.timeout(self._timeout_s):
                    status, answer = await conn.send(request)
            except BaseException:
                conn.close()
                raise
            if conn.reusable:
                conn.idle_since = time.monotonic()
                self._idle.append(conn)
            else:
                conn.close()
        if status >= 400:
            raise HttpStatusError(status, answer)
        return orjson.loads(answer)
