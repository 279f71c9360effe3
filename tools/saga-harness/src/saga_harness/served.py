"""An ASGI app served over real HTTP on 127.0.0.1 from a thread, for as long as a test needs
it: what fetches over HTTP (a verifier reading an issuer's keys, the console reading its
discovery document) is tested against a real server, not a mock of one."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import uvicorn


def free_socket(port: int = 0) -> socket.socket:
    """A socket bound on 127.0.0.1 (``port``, or one the kernel picks), for ``served``."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


@contextmanager
def served(app: Any, sock: socket.socket, *, lifespan: Literal["auto", "on", "off"] = "auto"
           ) -> Iterator[str]:
    """Serves ``app`` on ``sock`` (closed afterwards), its lifespan run unless ``lifespan`` is
    "off", and yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False,
                                           lifespan=lifespan))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])),
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the app did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
