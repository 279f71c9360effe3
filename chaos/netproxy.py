"""A TCP proxy of our own that injects network faults between a service and PostgreSQL, Kafka or
the payment gateway (``tc netem`` is not available on this machine).

Every route listens on one port and forwards to one target. Faults, per route:

- ``latency_s``: every chunk a client sends waits this long before it is forwarded, so every
  request/response round trip through the route (a SQL query, a Kafka request, an HTTP call)
  takes that much longer. Order is kept: chunks leave in the order they arrived.
- ``blackhole``: bytes stop moving in both directions and new connections hang, as in a
  network partition; TCP would retransmit, so nothing is dropped: when the hole closes the
  held bytes flow again (unless the peers gave up and closed first).
- ``refuse``: new connections are reset at once.
- ``reset``: an action, not a state: every open connection is closed with a TCP RST.

Used in process by tests (``ProxySet``) and as a stack part with an HTTP control API
(``python -m chaos.netproxy``, started by ``deploy/local/stack.py`` when ``SAGA_NETPROXY=1``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, Field

log = logging.getLogger("chaos.netproxy")

CHUNK = 64 * 1024


@dataclass
class Faults:
    latency_s: float = 0.0
    blackhole: bool = False
    refuse: bool = False


@dataclass(eq=False)  # identity: links live in a set
class _Link:
    """One proxied connection: the client side and the target side."""

    client: asyncio.StreamWriter
    target: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

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
            refuse: bool | None = None) -> None:
        if latency_s is not None:
            self.faults.latency_s = max(0.0, latency_s)
        if blackhole is not None:
            self.faults.blackhole = blackhole
        if refuse is not None:
            self.faults.refuse = refuse
        if self.faults.blackhole:
            self._flowing.clear()
        else:
            self._flowing.set()

    def clear(self) -> None:
        self.set(latency_s=0.0, blackhole=False, refuse=False)

    def reset_connections(self) -> int:
        links = list(self._links)
        for link in links:
            link.reset()
        self._links.clear()
        return len(links)

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "listen_port": self.listen_port,
                "target": f"{self.target[0]}:{self.target[1]}", **asdict(self.faults),
                "open_connections": len(self._links), "connections_total": self.connections_total}

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
        link.tasks = [asyncio.create_task(self._pipe(reader, t_writer, delayed=True)),
                      asyncio.create_task(self._pipe(t_reader, writer, delayed=False))]
        try:
            await asyncio.gather(*link.tasks, return_exceptions=True)
        finally:
            self._links.discard(link)
            for w in (writer, t_writer):
                w.close()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *,
                    delayed: bool) -> None:
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


# ---------------------------------------------------------------- layout shared with the stack

SERVICES = ("pedidos", "inventario", "pagos")
PROXY_BASE_PORT = int(os.environ.get("NETPROXY_BASE_PORT", "15400"))
CONTROL_PORT = PROXY_BASE_PORT
# Kafka needs one listener per proxied service, advertised at that service's proxy port, so
# that the broker connections the client opens after bootstrap also go through the proxy.
KAFKA_PROXIED_LISTENER_BASE = int(os.environ.get("KAFKA_PROXIED_LISTENER_BASE", "9094"))


def route_port(service: str, dependency: str) -> int:
    """pedidos-postgres 15411, pedidos-kafka 15412, inventario-postgres 15421, …"""
    return (PROXY_BASE_PORT + 10 * (SERVICES.index(service) + 1)
            + ("postgres", "kafka", "gateway").index(dependency) + 1)


def kafka_listener_port(service: str) -> int:
    return KAFKA_PROXIED_LISTENER_BASE + SERVICES.index(service)


def kafka_listener_name(service: str) -> str:
    return f"PROXIED_{service.upper()}"


def stack_routes(pg_port: int, gateway_port: int) -> dict[str, tuple[int, str, int]]:
    routes: dict[str, tuple[int, str, int]] = {}
    for svc in SERVICES:
        routes[f"{svc}-postgres"] = (route_port(svc, "postgres"), "127.0.0.1", pg_port)
        routes[f"{svc}-kafka"] = (route_port(svc, "kafka"), "127.0.0.1", kafka_listener_port(svc))
    routes["pagos-gateway"] = (route_port("pagos", "gateway"), "127.0.0.1", gateway_port)
    return routes


# ---------------------------------------------------------------- the stack part

class FaultChange(BaseModel):
    latency_s: float | None = Field(None, ge=0)
    blackhole: bool | None = None
    refuse: bool | None = None


def _control_app(proxies: ProxySet) -> Any:
    from fastapi import FastAPI, HTTPException

    app = FastAPI(title="netproxy")

    def route(name: str) -> Route:
        if name not in proxies.routes:
            raise HTTPException(404, f"no route {name}; routes: {sorted(proxies.routes)}")
        return proxies[name]

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/routes")
    async def routes() -> list[dict[str, object]]:
        return [r.describe() for r in proxies.routes.values()]

    @app.put("/routes/{name}")
    async def change(name: str, body: FaultChange) -> dict[str, object]:
        r = route(name)
        r.set(**body.model_dump())
        log.warning("route %s: %s", name, json.dumps(r.describe()))
        return r.describe()

    @app.post("/routes/{name}/reset")
    async def reset(name: str) -> dict[str, int]:
        return {"reset": route(name).reset_connections()}

    @app.delete("/faults")
    async def clear() -> dict[str, str]:
        proxies.clear()
        log.warning("every fault cleared")
        return {"status": "cleared"}

    return app


async def _serve() -> None:
    import uvicorn

    pg_port = int(os.environ.get("PG_PORT", "25432"))
    gateway_port = int(os.environ.get("GATEWAY_PORT", "8010"))
    async with ProxySet(stack_routes(pg_port, gateway_port)) as proxies:
        config = uvicorn.Config(_control_app(proxies), host="127.0.0.1", port=CONTROL_PORT,
                                log_level="warning", access_log=False)
        await uvicorn.Server(config).serve()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(_serve())
