"""The replayer sagactl and the console share: each letter read from its service's API, replayed
only when it matches the broker, what came of it recorded through the API; the broker check's
verdict shown with the plan; a group's letters each on its own, one acted on since left alone."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sagakit import dead_letters
from sagakit.dead_letters import Attempt, Original
from sagakit.envelope import Envelope
from sagakit.operations import replay
from sagakit.operations.replay import BrokerRecord
from sagakit.operations.replayer import LetterUnavailable, Replayer


def _record() -> BrokerRecord:
    envelope = Envelope.new(saga_id=str(uuid.uuid4()), event_type="PagoExitoso",
                            schema_version="1.0.0", source_service="pagos",
                            payload={"order_id": str(uuid.uuid4()),
                                     "payment_id": str(uuid.uuid4()), "charge_id": "ch_1",
                                     "amount": "10.00", "currency": "USD"})
    return BrokerRecord("payment-events", 2, 17, envelope.saga_id.encode(),
                        json.dumps(envelope.to_dict()).encode(),
                        [(k, v.encode()) for k, v in envelope.kafka_headers().items()])


def _letter(record: BrokerRecord) -> dict[str, Any]:
    decoded = json.loads(record.value or b"{}")
    return dead_letters.build(
        service="inventario", reason="retries_exhausted", error_class="LockNotAvailableError",
        attempts=[Attempt(1, "2026-12-06T00:00:00Z", "LockNotAvailableError('lock')")],
        last_traceback="", saga_id=decoded["saga_id"], rebuilt=False,
        original=Original(record.topic, record.value, decoded["message_id"],
                          decoded["event_type"], record.key, list(record.headers),
                          record.partition, record.offset)).value


class _Api:
    """A service's dead-letter API, kept in memory."""

    def __init__(self, letters: dict[str, dict[str, Any]]) -> None:
        self.letters = letters
        self.asked: list[str] = []
        self.recorded: list[tuple[str, str]] = []

    async def letter(self, service: str, letter_id: str) -> Mapping[str, Any]:
        self.asked.append(letter_id)
        if letter_id not in self.letters:
            raise LetterUnavailable(f"{service} knows no dead letter {letter_id}")
        return self.letters[letter_id]

    async def forged(self, service: str, letter_id: str, reason: str) -> None:
        self.recorded.append(("forged", letter_id))
        self.letters[letter_id]["state"] = "forged"

    async def replayed(self, service: str, letter_id: str, message_id: str, topic: str) -> str:
        self.recorded.append(("replayed", letter_id))
        self.letters[letter_id]["state"] = "replayed"
        return message_id


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[tuple[str, int, int], BrokerRecord],
                                                     list[replay.Replay]]:
    held: dict[tuple[str, int, int], BrokerRecord] = {}
    sent: list[replay.Replay] = []

    async def read_record(kafka: Any, topic: str, partition: int, offset: int) -> BrokerRecord:
        return held[(topic, partition, offset)]

    async def publish(plan: replay.Replay, kafka: Any) -> None:
        sent.append(plan)

    monkeypatch.setattr(replay, "read_record", read_record)
    monkeypatch.setattr(replay, "publish", publish)
    return held, sent


def _replayer(api: _Api, dry_run: bool = False) -> Replayer:
    key = Ed25519PrivateKey.generate()
    return Replayer("inventario", api, lambda: key, None, dry_run)  # type: ignore[arg-type]


async def test_a_dry_run_shows_the_plan_and_the_broker_checks_verdict_and_sends_nothing(
        broker: Any) -> None:
    held, sent = broker
    record = _record()
    held[(record.topic, record.partition, record.offset)] = record
    api = _Api({"a": {"state": "open", "letter": _letter(record)}})
    outcome = await _replayer(api, dry_run=True).one("a")
    assert outcome.outcome == "would_replay" and sent == [] and api.recorded == []
    assert outcome.broker_check == {
        "found_at": {"topic": "payment-events", "partition": 2, "offset": 17},
        "match": "byte for byte: key, value and every header",
        "topology": "allowed: inventario consumes PagoExitoso on payment-events"}
    assert outcome.plan is not None and outcome.plan["headers"]["X-Replay-For"] == "inventario"

    done = await _replayer(api).one("a")
    assert done.outcome == "replayed" and [p.topic for p in sent] == ["payment-events"]
    assert api.recorded == [("replayed", "a")] and done.broker_check == outcome.broker_check


async def test_a_forged_letter_is_reported_through_the_api_and_nothing_is_sent(
        broker: Any) -> None:
    held, sent = broker
    record, other = _record(), _record()
    held[(record.topic, record.partition, record.offset)] = record
    api = _Api({"f": {"state": "open", "letter": _letter(
        BrokerRecord(record.topic, record.partition, record.offset, other.key, other.value,
                     other.headers))}})
    outcome = await _replayer(api).one("f")
    assert outcome.outcome == "forged" and outcome.broker_check is None and sent == []
    assert api.recorded == [("forged", "f")]


async def test_a_letter_the_service_does_not_give_is_refused(broker: Any) -> None:
    outcome = await _replayer(_Api({})).one("nope")
    assert outcome.outcome == "refused" and "knows no dead letter" in outcome.detail


async def test_a_group_replays_each_open_letter_and_leaves_the_others(broker: Any) -> None:
    held, sent = broker
    records = [_record() for _ in range(2)]
    for r in records:
        held[(r.topic, r.partition, r.offset + len(held))] = r
    letters = {}
    for i, r in enumerate(records):
        letter = _letter(BrokerRecord(r.topic, r.partition, r.offset + i, r.key, r.value,
                                      r.headers))
        letters[f"l{i}"] = {"state": "open", "letter": letter}
    letters["l1"]["state"] = "archived"
    api = _Api(letters)
    outcomes = await _replayer(api).group(["l0", "l1"])
    assert [(o.id, o.outcome) for o in outcomes] == [("l0", "replayed"), ("l1", "refused")]
    assert api.asked == ["l0", "l1"] and len(sent) == 1
