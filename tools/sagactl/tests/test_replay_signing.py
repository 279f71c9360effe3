"""The replay sagactl builds carries the operator's signature of the very record it publishes,
made with the key it finds: SAGACTL_SIGNING_KEY_FILE, or the local stack's in the checkout."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from saga_contracts import headers as h
from saga_contracts import replay_signature
from saga_contracts.replay_signature import OperatorKeys, Signed
from sagactl import cli
from sagakit.operations import replay


def _letter(headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A dead letter of inventario's, as ``sagakit.dead_letters`` writes them."""
    saga_id, message_id = str(uuid.uuid4()), str(uuid.uuid4())
    envelope = {
        "message_id": message_id, "saga_id": saga_id, "span_id": str(uuid.uuid4()),
        "parent_span_id": None, "schema_version": "1.0.0",
        "timestamp": "2026-11-29T10:30:00.000000Z", "source_service": "pagos",
        "event_type": "PagoExitoso", "metadata": {},
        "payload": {"order_id": str(uuid.uuid4()), "payment_id": str(uuid.uuid4()),
                    "charge_id": "ch_1", "amount": "10.00", "currency": "USD"},
    }
    return {"original": {
        "topic": "payment-events", "key": saga_id,
        "value": {"encoding": "utf-8", "data": json.dumps(envelope)},
        "headers": {h.MESSAGE_ID: message_id, h.SAGA_ID: saga_id, "X-DLQ-Attempts": "5",
                    **(headers or {})},
    }}


def _as_published(plan: replay.Replay) -> Signed:
    """What a consumer reads of the record ``replay.publish`` sends."""
    return Signed(replay_for=plan.headers[h.REPLAY_FOR], topic=plan.topic,
                  key=plan.record_key(), value=plan.record_value(),
                  message_id=plan.headers[h.MESSAGE_ID], saga_id=plan.headers[h.SAGA_ID])


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "operator.key"
    path.write_bytes(replay_signature.new_private_key())
    monkeypatch.setenv("SAGACTL_SIGNING_KEY_FILE", str(path))
    return path


def test_the_replay_carries_the_operator_s_signature_of_what_is_published(
        key_file: Path) -> None:
    key = replay_signature.load_private_key(key_file.read_bytes())
    plan = replay.signed(replay.build(replay.claimed_record(_letter()), "inventario",
                                      str(uuid.uuid4())), key)
    keys = OperatorKeys.parse(replay_signature.public_entry(key))
    assert plan.headers[h.REPLAY_FOR] == "inventario"
    assert plan.headers[h.REPLAY_SIGNATURE].startswith(keys.ids[0] + ":")
    assert keys.forgery(plan.headers[h.REPLAY_SIGNATURE], _as_published(plan)) is None


def test_a_replay_of_a_replay_drops_the_earlier_signature() -> None:
    letter = _letter({h.REPLAY_SIGNATURE: "0123456789abcdef:old"})
    plan = replay.build(replay.claimed_record(letter), "inventario", str(uuid.uuid4()))
    assert h.REPLAY_SIGNATURE not in plan.headers


def test_signing_key_prints_the_key_as_the_services_list_it(
        key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["signing-key"])
    assert done.value.code == 0
    entry = capsys.readouterr().out.strip()
    key = replay_signature.load_private_key(key_file.read_bytes())
    assert entry == replay_signature.public_entry(key)
    assert OperatorKeys.parse(entry).ids == [entry.partition(":")[0]]
    assert "PRIVATE" not in entry


def test_without_the_variable_the_key_is_the_local_stack_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAGACTL_SIGNING_KEY_FILE", raising=False)
    monkeypatch.setenv("SAGA_STATE_DIR", str(tmp_path))
    assert cli._signing_key_file() == tmp_path / "secrets" / "operator-signing.key"
    monkeypatch.delenv("SAGA_STATE_DIR")
    checkout = Path(__file__).resolve().parents[3]
    assert cli._signing_key_file() == checkout / ".local" / "secrets" / "operator-signing.key"


def test_without_a_key_it_says_where_it_looked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.key"
    monkeypatch.setenv("SAGACTL_SIGNING_KEY_FILE", str(missing))
    with pytest.raises(SystemExit) as done:
        cli.main(["signing-key"])
    assert done.value.code == 2
    assert str(missing) in capsys.readouterr().err


def test_letters_are_grouped_per_service_event_type_and_key() -> None:
    from sagactl.dead_letters import grouped

    rows = [{"id": str(i), "service": s, "event_type": e, "error_class": c, "reason": "r",
             "at": f"2026-12-06T00:0{i}"}
            for i, (s, e, c) in enumerate([("inventario", "PagoExitoso", "LockNotAvailable"),
                                           ("inventario", "PagoExitoso", "LockNotAvailable"),
                                           ("inventario", "PagoExitoso", "OperationalError"),
                                           ("pedidos", "PagoExitoso", "LockNotAvailable")])]
    groups = grouped(rows, "error_class")
    assert [(g["service"], g["error_class"], g["count"], g["ids"]) for g in groups] == [
        ("inventario", "LockNotAvailable", 2, ["0", "1"]),
        ("inventario", "OperationalError", 1, ["2"]),
        ("pedidos", "LockNotAvailable", 1, ["3"])]
    assert groups[0]["oldest"] == "2026-12-06T00:00" and groups[0]["newest"] == "2026-12-06T00:01"
    assert [(g["service"], g["count"]) for g in grouped(rows, "reason")] == [
        ("inventario", 3), ("pedidos", 1)]
