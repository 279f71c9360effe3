"""The metrics-only server answers Prometheus with no token (nothing to expire); the API's
/metrics still asks for an operator's."""

from __future__ import annotations

import socket
import urllib.request

import httpx
import pytest
from fastapi import FastAPI

from sagakit.auth import install_authentication
from sagakit.observability import metrics, metrics_server
from sagakit.runtime.operations import operational_router


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_metrics_port_answers_without_a_token() -> None:
    metrics.OUTBOX_PENDING.labels("metrics-server-test").set(3)
    server = metrics_server.start("127.0.0.1", _free_port())
    assert server is not None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics",
                                    timeout=5) as answer:
            body = answer.read().decode()
        assert answer.status == 200
        assert 'outbox_pending_messages{service="metrics-server-test"} 3.0' in body
    finally:
        server.close()


def test_port_zero_starts_no_server() -> None:
    assert metrics_server.start("127.0.0.1", 0) is None


class _NoTokens:
    async def verify(self, token: str) -> None:  # pragma: no cover - never called
        raise AssertionError("no token is sent")


async def test_the_api_metrics_still_ask_for_an_operator() -> None:
    app = FastAPI()
    install_authentication(app, _NoTokens())  # type: ignore[arg-type]
    app.include_router(operational_router())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://t") as client:
        assert (await client.get("/metrics")).status_code == 401


def test_a_taken_metrics_port_ends_the_process_with_one_log_line(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Not a traceback on stderr: the logs stay JSON lines (the process' log is its stderr)."""
    from sagakit.runtime import app as runtime_app
    from sagakit.runtime import http_server

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://x@h/d")
        monkeypatch.setenv("METRICS_PORT", str(port))
        monkeypatch.setattr("sagakit.observability.structured_logging.configure",
                            lambda *args: None)
        monkeypatch.setattr(http_server, "run", lambda *a, **k: pytest.fail("served"))
        with pytest.raises(SystemExit) as ended:
            runtime_app.serve(FastAPI, "metrics-test")
    assert ended.value.code == 1
    assert any("cannot serve the metrics" in r.getMessage() for r in caplog.records)
