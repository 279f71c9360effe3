"""``python -m peer_dbos SHAPE``: the peer in one of its shapes, in the foreground.

- ``single``: one process serving ``POST /orders`` and running the workflows.
- ``per_core``: one such process per core, all accepting on the same listening socket.
- ``queue``: an API process that enqueues on a DBOS queue and a worker process that runs it.

This process binds the port, hands the socket to the processes of the shape and waits; a
SIGTERM or SIGINT stops them all. (``python -m peer_dbos http --fd N [--queue-api]`` and
``python -m peer_dbos worker`` are the processes it starts.)
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

from peer_dbos.settings import PeerSettings, system_schema
from sagakit.runtime.http_server import run as serve_http
from sagakit.runtime.settings import ServiceSettings
from sagakit.settings import load

SHAPES = ("single", "per_core", "queue")


def _http(fd: int, queue_api: bool) -> None:
    from peer_dbos.api import inline_app, queue_app

    app = queue_app() if queue_api else inline_app()
    # The services' own deadline for a request's headers: both pay for the same front door.
    header_timeout_s = ServiceSettings.model_fields["http_header_timeout_s"].default
    # The HTTP protocol is sagakit's (httptools' with that deadline), as the services'.
    serve_http(app, fd=fd, access_log=False, log_level="warning", loop="uvloop",
               timeout_keep_alive=5, header_timeout_s=header_timeout_s)


def _worker() -> None:
    from peer_dbos.runtime import launch

    launch(load(PeerSettings), queue_worker=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    from dbos import DBOS

    DBOS.destroy()


def pools_of_each(settings: PeerSettings, processes: int) -> dict[str, str]:
    """The connection pools of each of a shape's ``processes``: the settings' sizes shared
    among them (rounded up), since the clients are too. Each process keeping the whole size
    would hold more connections than PostgreSQL's ``max_connections`` once the closed loop
    fills the pools, and a shape of N processes would not be measured with the pools of one."""
    def share(size: int) -> str:
        return str(-(-size // processes))

    return {"PEER_DBOS_SYSTEM_POOL_SIZE": share(settings.system_pool_size),
            "PEER_DBOS_DATASOURCE_POOL_SIZE": share(settings.datasource_pool_size)}


def _supervise(shape: str) -> None:
    from peer_dbos.runtime import create_tables, migrate_system_tables

    os.environ.setdefault("PEER_DBOS_SYSTEM_SCHEMA", system_schema(shape))
    settings = load(PeerSettings)
    create_tables(settings)
    migrate_system_tables(settings)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", settings.port))
    listener.listen(2048)
    fd = listener.fileno()
    me = [sys.executable, "-m", "peer_dbos"]
    commands: list[list[str]]
    if shape == "queue":
        commands = [[*me, "http", "--fd", str(fd), "--queue-api"], [*me, "worker"]]
    else:
        count = 1 if shape == "single" else (settings.processes or os.cpu_count() or 1)
        commands = [[*me, "http", "--fd", str(fd)] for _ in range(count)]
    env = {**os.environ, **pools_of_each(settings, len(commands))}
    children = [subprocess.Popen(c, pass_fds=(fd,), env=env) for c in commands]
    listener.close()

    def stop(*_: Any) -> None:
        for child in children:
            if child.poll() is None:
                child.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # One process of the shape ending ends the shape: a peer with a process missing would be
    # measured as something it is not.
    os.wait()
    stop()
    sys.exit(max(child.wait() for child in children))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m peer_dbos")
    parser.add_argument("shape", choices=[*SHAPES, "http", "worker"])
    parser.add_argument("--fd", type=int)
    parser.add_argument("--queue-api", action="store_true")
    args = parser.parse_args()
    if args.shape == "http":
        _http(args.fd, args.queue_api)
    elif args.shape == "worker":
        _worker()
    else:
        _supervise(args.shape)


if __name__ == "__main__":
    main()
