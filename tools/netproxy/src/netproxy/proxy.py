"""A TCP proxy of our own that injects network faults between a service and PostgreSQL, Kafka or
the payment gateway (where ``tc netem`` is not available, as on the machines the tests run on).

Every route listens on one port and forwards to one target. Faults, per route:

- ``latency_s``: every chunk a client sends waits this long before it is forwarded, so every
  request/response round trip through the route (a SQL query, a Kafka request, an HTTP call)
  takes that much longer. Order is kept: chunks leave in the order they arrived.
- ``blackhole``: bytes stop moving in both directions and new connections hang, as in a
  network partition; TCP would retransmit, so nothing is dropped: when the hole closes the
  held bytes flow again (unless the peers gave up and closed first).
- ``refuse``: new connections are reset at once.
- ``reset``: an action, not a state: every open connection is closed with a TCP RST.
- ``html_share``, ``garbage_share``: for routes that carry HTTP/1.1, the share of requests
  answered ``200 OK`` by the proxy itself (``netproxy.replies``): an HTML page in place of the
  target's reply (the request was forwarded: what it asked may have been done), or random
  bytes (the request was not forwarded). Each such answer closes its connection, and is
  logged with the request's ``Idempotency-Key`` (``Route.garbled``), so a test can tell which
  calls were answered so.

Used in process by tests (``ProxySet``) and as a stack part with an HTTP control API
(``netproxy.control``: ``python -m netproxy``, started by the local stack (``local_stack``) when
``SAGA_NETPROXY=1``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time
from collections import deque
from dataclasses import asdict, dataclass, field

from netproxy import replies

CHUNK = 64 * 1024
# How many garbled answers a route remembers (oldest forgotten first).
GARBLED_KEPT = 100_000


@dataclass
class Faults:
    latency_s: float = 0.0
    blackhole: bool = False
    refuse: bool = False
    html_share: float = 0.0
    garbage_share: float = 0.0


@dataclass(frozen=True)
class Garbled:
    """A request the proxy answered itself (``replies.HTML`` or ``replies.GARBAGE``)."""

    kind: str
    idempotency_key: str | None


@dataclass(eq=False)  # identity: links live in a set
class _Link:
    """One proxied connection: the client side and the target side."""

    client: asyncio.StreamWriter
    target: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    between_requests: bool = True
    """The next bytes the client sends start a request (HTTP/1.1 without pipelining: a client
    sends its next request once the reply to the last one has begun)."""
    replace_reply: bool = False
    """The target's reply to the request in flight is thrown away for an HTML page."""

    def reset(self) -> None:
        for writer in (self.client, self.target):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        for task in self.tasks:
            task.cancel()


class Route:
    def __init__(self, name: str, listen_port: int, target_host: str, target_port: int) -> None:
        self.name = name
        self.listen_port = listen_port
        self.target = (target_host, target_port)
        self.faults = Faults()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._links: set[_Link] = set()
        self._server: asyncio.Server | None = None
        self.connections_total = 0
        self.garbled: deque[Garbled] = deque(maxlen=GARBLED_KEPT)
        self._rng = random.Random()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port,
                                                  reuse_address=True)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.reset()
        self._links.clear()
        if self._server is not None:
            await self._server.wait_closed()

    def set(self, *, latency_s: float | None = None, blackhole: bool | None = None,
            refuse: bool | None = None, html_share: float | None = None,
            garbage_share: float | None = None) -> None:
        if latency_s is not None:
            self.faults.latency_s = max(0.0, latency_s)
        if blackhole is not None:
            self.faults.blackhole = blackhole
        if refuse is not None:
            self.faults.refuse = refuse
        if html_share is not None:
            self.faults.html_share = min(1.0, max(0.0, html_share))
        if garbage_share is not None:
            self.faults.garbage_share = min(1.0, max(0.0, garbage_share))
        if self.faults.blackhole:
            self._flowing.clear()
        else:
            self._flowing.set()

    def clear(self) -> None:
        self.set(latency_s=0.0, blackhole=False, refuse=False, html_share=0.0,
                 garbage_share=0.0)

    def reset_connections(self) -> int:
        links = list(self._links)
        for link in links:
            link.reset()
        self._links.clear()
        return len(links)

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "listen_port": self.listen_port,
                "target": f"{self.target[0]}:{self.target[1]}", **asdict(self.faults),
                "open_connections": len(self._links), "connections_total": self.connections_total,
                "garbled_total": len(self.garbled)}

    def _reply_fault(self) -> str | None:
        """Whether the request that starts now is answered by the proxy, and how."""
        draw = self._rng.random()
        if draw < self.faults.garbage_share:
            return replies.GARBAGE
        if draw < self.faults.garbage_share + self.faults.html_share:
            return replies.HTML
        return None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_total += 1
        if self.faults.refuse:
            _Link(writer, writer).reset()
            return
        await self._flowing.wait()  # a black hole: the connection hangs, as SYNs would
        try:
            t_reader, t_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _Link(writer, writer).reset()  # the target is down: so is the route
            return
        link = _Link(writer, t_writer)
        self._links.add(link)
        link.tasks = [asyncio.create_task(self._pipe(reader, t_writer, link, delayed=True)),
                      asyncio.create_task(self._pipe(t_reader, writer, link, delayed=False))]
        try:
            await asyncio.gather(*link.tasks, return_exceptions=True)
        finally:
            self._links.discard(link)
            for w in (writer, t_writer):
                w.close()

    async def _answer_instead(self, link: _Link, reply: bytes) -> None:
        """Answers the client with ``reply`` and closes both sides (``Connection: close``)."""
        with contextlib.suppress(OSError):
            link.client.write(reply)
            await link.client.drain()
        link.client.close()
        link.target.close()

    async def _request_starts(self, src: asyncio.StreamReader, link: _Link, data: bytes
                              ) -> bool:
        """The client's ``data`` begins a request: whether the proxy answered it itself (the
        request then goes no further, and neither does the connection)."""
        link.between_requests = False
        kind = self._reply_fault()
        if kind is None:
            return False
        if kind == replies.HTML:
            self.garbled.append(Garbled(kind, replies.idempotency_key(data)))
            link.replace_reply = True  # forwarded; the target's answer is replaced
            return False
        # Garbage: the whole request is read (a client that is still writing its body when
        # the answer comes would fail on the write, not on the answer), and not forwarded.
        while (needed := replies.request_length(data)) is None or len(data) < needed:
            more = await src.read(CHUNK)
            if not more:
                break
            data += more
        self.garbled.append(Garbled(kind, replies.idempotency_key(data)))
        await self._answer_instead(link, replies.garbage(self._rng))
        return True

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, link: _Link,
                    *, delayed: bool) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def forward() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    with contextlib.suppress(OSError):
                        if dst.can_write_eof():
                            dst.write_eof()
                    return
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                await self._flowing.wait()
                dst.write(data)
                await dst.drain()

        sender = asyncio.create_task(forward())
        try:
            while True:
                data = await src.read(CHUNK)
                await self._flowing.wait()
                # Reply faults: the proxy answers in the target's place, and the connection
                # ends there (the sender's queue is dropped with it).
                if delayed and data and link.between_requests:
                    if await self._request_starts(src, link, data):
                        return
                elif not delayed and data:
                    if link.replace_reply:
                        await self._answer_instead(link, replies.html_page())
                        return
                    link.between_requests = True
                latency = self.faults.latency_s if delayed else 0.0
                queue.put_nowait((time.monotonic() + latency, data))
                if not data:
                    break
            await sender
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await sender
            # One side is gone: close the other too, so neither waits forever.
            dst.close()


class ProxySet:
    """Several routes run together (in a test's event loop or in the proxy process)."""

    def __init__(self, routes: dict[str, tuple[int, str, int]]) -> None:
        self.routes = {name: Route(name, port, host, tport)
                       for name, (port, host, tport) in routes.items()}

    async def __aenter__(self) -> ProxySet:
        for route in self.routes.values():
            await route.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for route in self.routes.values():
            await route.close()

    def __getitem__(self, name: str) -> Route:
        return self.routes[name]

    def clear(self) -> None:
        for route in self.routes.values():
            route.clear()
