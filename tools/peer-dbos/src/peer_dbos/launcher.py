"""Starts a shape of the peer as a child process and stops it: what the benchmark and the
tests do with it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx


class PeerProcess:
    """``with PeerProcess("single", database_url=..., gateway_secret_key=...) as peer:``
    then ``peer.url``; ``peer.pid`` is the root of every process of the shape."""

    def __init__(self, shape: str, *, database_url: str, gateway_secret_key: str,
                 gateway_url: str = "http://127.0.0.1:8010", port: int = 8040,
                 settings: dict[str, str] | None = None) -> None:
        self.shape, self.port = shape, port
        self.url = f"http://127.0.0.1:{port}"
        self._env = {**os.environ, "PEER_DBOS_DATABASE_URL": database_url,
                     "PEER_DBOS_GATEWAY_SECRET_KEY": gateway_secret_key,
                     "PEER_DBOS_GATEWAY_URL": gateway_url, "PEER_DBOS_PORT": str(port),
                     **{f"PEER_DBOS_{k.upper()}": v for k, v in (settings or {}).items()}}
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def start(self, timeout_s: float = 60.0) -> None:
        self._proc = subprocess.Popen([sys.executable, "-m", "peer_dbos", self.shape],
                                      env=self._env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the peer ({self.shape}) exited with {self._proc.returncode}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    # The queue shape answers from its API process; its worker may still be
                    # launching: its first poll finds what was enqueued meanwhile.
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)  # a process starting, polled until its deadline
        self.stop()
        raise RuntimeError(f"the peer ({self.shape}) did not answer within {timeout_s:g} s")

    def stop(self, timeout_s: float = 30.0) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> PeerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
