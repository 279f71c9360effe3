"""sagactl never prints a payment token, in the clear or sealed: not in a replay's plan, not in a
dead letter's errors, not in a saga's timeline, not in why it refused a replay. Its database,
the service's API and the broker are played by the calls it would make; what a replay would
send keeps the sealed token."""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saga_contracts import registry
from saga_harness.events import payload_of
from sagactl import cli, dead_letters, operator_access
from sagakit.operations import replay
from sagakit.settings import KafkaClientSettings

CLEAR = "tok_visa_sagactl_4242"


class _Connection:
    async def close(self) -> None:
        return None


def _letter(payload: dict[str, Any]) -> dict[str, Any]:
    saga_id = str(uuid.uuid4())
    envelope = {"message_id": str(uuid.uuid4()), "saga_id": saga_id, "span_id": str(uuid.uuid4()),
                "parent_span_id": None,
                "schema_version": registry.latest("StockVerificado").version,
                "timestamp": "2026-12-04T10:00:00.000000Z", "source_service": "inventario",
                "event_type": "StockVerificado", "payload": payload, "metadata": {}}
    return {"reason": "retries_exhausted",
            "attempts": [{"attempt": 1, "at": "t1", "error": f"gateway refused {CLEAR}"},
                         {"attempt": 2, "at": "t2",
                          "error": f"bad token {payload['payment_method']['token']}"}],
            "original": {"topic": "inventory-events", "partition": 0, "offset": 5,
                         "key": saga_id, "headers": {},
                         "value": {"encoding": "utf-8", "data": json.dumps(envelope)}}}


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str],
         letter: dict[str, Any] | None = None, **queries: Any) -> tuple[int, str]:
    async def connect(dsn: str) -> _Connection:
        return _Connection()

    def api(service: str, method: str, path: str, body: Any = None) -> dict[str, Any]:
        assert method == "GET", "a dry run records nothing"
        return {"state": "open", "letter": letter}

    async def read_record(kafka: Any, topic: str, partition: int, offset: int
                          ) -> replay.BrokerRecord:
        assert letter is not None
        return replay.claimed_record(letter)  # the broker holds what the letter says

    # The database is played by the queries below, the service's API by ``api`` (``letter``),
    # the broker by ``read_record``; a replay is signed with a key of the test's.
    monkeypatch.setenv("SAGACTL_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("SAGACTL_SIGNING_KEY_FILE", str(_signing_key_file(tmp_path_factory())))
    monkeypatch.setattr(cli.connection, "connect", connect)
    monkeypatch.setattr(operator_access, "call", api)
    monkeypatch.setattr(operator_access, "kafka", lambda: KafkaClientSettings())
    monkeypatch.setattr(replay, "read_record", read_record)
    for name, fake in queries.items():
        monkeypatch.setattr(dead_letters if name == "letters" else cli.reads, name, fake)
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


def tmp_path_factory() -> Path:
    return Path(tempfile.mkdtemp(prefix="sagactl-masking-"))


def _signing_key_file(directory: Path) -> Path:
    path = directory / "operator-signing.key"
    path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return path


def _assert_no_token(text: str, *tokens: str) -> None:
    assert "tok_" not in text and "sealed:" not in text, text
    for token in tokens:
        assert token not in text


def test_a_dry_run_shows_no_token_and_the_replay_keeps_it_sealed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    payload = payload_of("StockVerificado", str(uuid.uuid4()))
    sealed = payload["payment_method"]["token"]
    letter = _letter(payload)

    code, out = _run(monkeypatch, capsys, ["replay", "dl-1", "--service", "pagos", "--dry-run"],
                     letter=letter)
    assert code == 0, out
    _assert_no_token(out, sealed, sealed.rsplit(":", 1)[1])
    plan = json.loads(out[:out.rindex("}") + 1])
    assert plan["value"]["payload"]["payment_method"] == {"type": "credit_card",
                                                          "token": "[MASKED]"}
    assert plan["headers"]["X-Replay-For"] == "pagos"
    sent = replay.build(replay.claimed_record(letter), "pagos", "dl-1")
    assert sent.value["payload"]["payment_method"]["token"] == sealed, "replayed as it came"


def test_a_replay_refused_does_not_quote_the_token_it_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    payload = payload_of("StockVerificado", str(uuid.uuid4()),
                         payment_method={"type": "credit_card", "token": CLEAR})

    code, out = _run(monkeypatch, capsys, ["replay", "dl-1", "--service", "pagos", "--dry-run"],
                     letter=_letter(payload))
    assert code == 2 and "cannot replay" in out
    _assert_no_token(out, CLEAR)


def test_dead_letter_errors_show_no_token(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    letter = _letter(payload_of("StockVerificado", str(uuid.uuid4())))

    async def letters(conn: Any, **selection: Any) -> list[dict[str, Any]]:
        return [{"id": "dl-1", "service": "pagos", "at": "t2", "saga_id": "s-1",
                 "event_type": "StockVerificado", "state": "open",
                 "error_class": "gateway", **letter}]

    code, out = _run(monkeypatch, capsys, ["dlq", "--errors"], letters=letters)
    assert code == 0 and "dl-1" in out and "gateway refused [MASKED]" in out
    _assert_no_token(out, CLEAR)


def test_a_timeline_shows_no_token(monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    async def timeline(conn: Any, saga_id: str) -> list[dict[str, Any]]:
        return [{"at": "t1", "where": "pagos", "what": "gateway charge",
                 "detail": f"attempt 1: rejected HTTP 422: source {CLEAR}"}]

    code, out = _run(monkeypatch, capsys, ["timeline", "s-1"], timeline=timeline)
    assert code == 0 and "gateway charge" in out
    _assert_no_token(out, CLEAR)
