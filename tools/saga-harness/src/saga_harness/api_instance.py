"""Another instance of a service, started by a test beside the running stack's: its API alone
(no consumer, no relay, no jobs unless asked: the stack's instance does that work), on its own
HTTP port and without a metrics server (the stack's instance holds that port), with the
stack's database, credentials and settings, and the test's settings on top.

    with api_instance("pedidos", {"PEDIDOS_DECLINES_PER_CUSTOMER": "2"}, name="declines") as url:
        ...  # url: http://127.0.0.1:<port>, ready

``api_env`` is its environment, for a test that starts the process itself (one that must not
start, say)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO

import httpx

from local_stack import parts
from saga_harness.ports import free_port

READY_TIMEOUT_S = 60.0


def api_env(service: str, port: int, *, name: str, settings: Mapping[str, str] | None = None,
            run_jobs: bool = False, without: Iterable[str] = ()) -> dict[str, str]:
    """The environment of an instance of ``service`` serving its API on ``port``, named
    ``<name>-<port>`` (``SAGA_INSTANCE``); the stack's variables ``without`` removed, then
    ``settings`` on top."""
    env = {**parts.inherited_env(), **parts.service_env(service),
           "HTTP_PORT": str(port), "METRICS_PORT": "0", "SAGA_INSTANCE": f"{name}-{port}",
           "RUN_CONSUMER": "false", "RUN_RELAY": "false",
           "RUN_JOBS": "true" if run_jobs else "false", "PYTHONUNBUFFERED": "1"}
    for variable in without:
        env.pop(variable, None)
    return {**env, **(settings or {})}


def _tail(log: IO[bytes]) -> str:
    """The end of a process' output, for the message of a test that saw it stop."""
    log.seek(0)
    return log.read().decode(errors="replace")[-2000:]


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stops a process a test started: asked to, then killed if it has not within 15 s."""
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


@contextmanager
def api_instance(service: str, settings: Mapping[str, str] | None = None, *,
                 name: str) -> Iterator[str]:
    """Starts an instance of ``service`` (``api_env``), waits until its ``/ready`` answers
    200 (a test fails, with the process' output, if it stops or is not ready within
    ``READY_TIMEOUT_S``), yields its base URL, and stops it."""
    port = free_port()
    log = tempfile.TemporaryFile()
    process = subprocess.Popen([sys.executable, "-m", service],
                               env=api_env(service, port, name=name, settings=settings),
                               stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert process.poll() is None, f"the {service} instance stopped: {_tail(log)}"
            try:
                if httpx.get(f"{base}/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"the {service} instance is not ready"
            time.sleep(0.2)
        yield base
    finally:
        stop(process)
        log.close()
