"""sagactl's reads and actions without a stack: every command answers ``--output json`` with
one JSON document; an action is a POST to the owning service's API with the operator's token
and the reason, reference or note it was given, and its answer (refusals included) is shown
with its HTTP status; a refusal exits 1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from sagactl import cli

AT = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)


class _Connection:
    async def close(self) -> None:
        return None


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """A stand-in for pedidos' and pagos' APIs: records each request, answers as told."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append({"path": self.path, "body": body,
                         "authorization": self.headers["authorization"]})
            status, answer = (409, {"detail": "saga is COMPLETADA: nothing to retry",
                                    "status": "COMPLETADA"}) if "retry" in self.path \
                else (202, {"saga_id": "s-1", "status": "CANCELADA_POR_USUARIO"})
            if "resolution" in self.path:
                status, answer = 201, {"payment_id": "p-1", "reference": body["reference"],
                                       "resolved_by": "ops"}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setenv("SAGACTL_PEDIDOS_URL", base)
    monkeypatch.setenv("SAGACTL_PAGOS_URL", base + "/")
    monkeypatch.setenv("SAGACTL_TOKEN", "operator-token")
    try:
        yield seen
    finally:
        server.shutdown()


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, Any]:
    with pytest.raises(SystemExit) as done:
        cli.main([*argv, "--output", "json"])
    return int(done.value.code or 0), json.loads(capsys.readouterr().out)


def test_cancel_posts_the_reason_with_the_operators_token(
        api: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = _run(capsys, ["cancel", "s-1", "--reason", "asked by phone"])
    assert code == 0
    assert answer == {"http_status": 202, "saga_id": "s-1", "status": "CANCELADA_POR_USUARIO"}
    assert api == [{"path": "/sagas/s-1/cancel", "body": {"reason": "asked by phone"},
                    "authorization": "Bearer operator-token"}]


def test_a_refused_retry_exits_1_with_the_services_answer(
        api: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = _run(capsys, ["retry", "s-1"])
    assert code == 1 and answer["http_status"] == 409 and answer["status"] == "COMPLETADA"
    assert api[0]["body"] == {}, "no reason given, none sent"


def test_resolve_payment_posts_the_reference_and_the_note(
        api: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = _run(capsys, ["resolve-payment", "p-1", "--reference", "FIN-1",
                                 "--note", "bank transfer"])
    assert code == 0 and answer["http_status"] == 201
    assert api == [{"path": "/payments/p-1/resolution",
                    "body": {"reference": "FIN-1", "note": "bank transfer"},
                    "authorization": "Bearer operator-token"}]


def test_the_reads_answer_json(monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    async def connect(dsn: str) -> _Connection:
        assert dsn == "postgresql://sagactl_reader@db/saga"
        return _Connection()

    async def sagas(conn: Any, **kw: Any) -> list[dict[str, Any]]:
        return [{"saga_id": "s-1", "status": "PENDIENTE_PAGO", "age_s": 3.0, "idle_s": 1.0,
                 "stuck": False, "started_at": AT}]

    async def payments(conn: Any, *, needing_action: bool, saga_id: str | None,
                       limit: int) -> list[dict[str, Any]]:
        assert needing_action and saga_id == "s-1"
        return [{"payment_id": "p-1", "amount": "5.00", "marked_at": AT}]

    monkeypatch.setenv("SAGACTL_DATABASE_URL", "postgresql://sagactl_reader@db/saga")
    monkeypatch.setattr(cli.connection, "connect", connect)
    monkeypatch.setattr(cli.reads, "sagas", sagas)
    monkeypatch.setattr(cli.reads, "payments", payments)
    code, rows = _run(capsys, ["sagas"])
    assert code == 0 and rows[0]["saga_id"] == "s-1" and rows[0]["started_at"].startswith(
        "2026-12-06 01:00")
    code, rows = _run(capsys, ["payments", "--needing-action", "--saga", "s-1"])
    assert code == 0 and rows == [{"payment_id": "p-1", "amount": "5.00",
                                   "marked_at": "2026-12-06 01:00:00+00:00"}]


def test_every_command_takes_output_json(capsys: pytest.CaptureFixture[str]) -> None:
    parser_commands = ["sagas", "timeline x", "payments", "cancel x --reason r", "retry x",
                       "resolve-payment x --reference r", "dlq", "replay x --service pagos",
                       "signing-key", "topics check"]
    for line in parser_commands:
        with pytest.raises(SystemExit) as done:
            cli.main([*line.split(), "--output", "yaml"])
        # argparse knows the option and refuses only its value.
        assert done.value.code == 2 and "invalid choice: 'yaml'" in capsys.readouterr().err, line
