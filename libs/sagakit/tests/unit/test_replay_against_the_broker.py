"""A replay believes a dead letter for where its original sits, and nothing else: the record
read there must be the letter's original byte for byte (key, value, every header), or, for a
letter whose original the service rebuilt, the same message; and it must be an event the target
service consumes, on its topic (``saga_contracts.topology``), whatever the letter claims. What
is built is the broker's record, under a new message id."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import replace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saga_contracts import headers as h
from sagakit import dead_letters
from sagakit.dead_letters import Attempt, Original
from sagakit.envelope import Envelope
from sagakit.operations import replay
from sagakit.operations.replay import BrokerRecord, CannotReplay, Forged


def _paid() -> Envelope:
    return Envelope.new(saga_id=str(uuid.uuid4()), event_type="PagoExitoso",
                        schema_version="1.0.0", source_service="pagos",
                        payload={"order_id": str(uuid.uuid4()), "payment_id": str(uuid.uuid4()),
                                 "charge_id": "ch_1", "amount": "10.00", "currency": "USD"})


def _record(envelope: Envelope, topic: str = "payment-events",
            headers: list[tuple[str, bytes]] | None = None, key: bytes | None = None
            ) -> BrokerRecord:
    return BrokerRecord(topic, 3, 41, key if key is not None else envelope.saga_id.encode(),
                        json.dumps(envelope.to_dict()).encode(),
                        headers if headers is not None else
                        [(k, v.encode()) for k, v in envelope.kafka_headers().items()])


def _letter(record: BrokerRecord, service: str = "inventario", *, rebuilt: bool = False,
            envelope: Envelope | None = None) -> dict[str, Any]:
    """The letter ``service`` writes of ``record`` (as the consumer reads it)."""
    try:
        decoded = json.loads((record.value or b"{}").decode())
    except ValueError:  # not text: the consumer names it by its headers
        decoded = {}
    letter = dead_letters.build(
        service=service, reason="retries_exhausted", error_class="LockNotAvailableError",
        attempts=[Attempt(1, "2026-12-06T00:00:00Z", "LockNotAvailableError('lock')")],
        last_traceback="", saga_id=decoded.get("saga_id"), rebuilt=rebuilt,
        original=Original(record.topic, record.value if envelope is None else
                          json.dumps(envelope.to_dict(), indent=1).encode(),
                          decoded.get("message_id", "m"), decoded.get("event_type", "?"),
                          record.key, list(record.headers), record.partition, record.offset))
    return letter.value


def test_the_record_the_letter_was_written_of_matches_it() -> None:
    record = _record(_paid())
    letter = _letter(record)
    assert replay.address(letter["original"]) == ("payment-events", 3, 41)
    assert replay.mismatch(letter["original"], record) is None
    replay.verified(letter, "inventario", record)


@pytest.mark.parametrize(("change", "what"), [
    (lambda r: replace(r, key=b"another-saga"), "key"),
    (lambda r: replace(r, value=(r.value or b"").replace(b"10.00", b"10.01")), "value"),
    (lambda r: replace(r, value=(r.value or b"") + b" "), "value"),
    (lambda r: replace(r, headers=[*r.headers, ("X-Extra", b"1")]), "headers"),
    (lambda r: replace(r, headers=[(k, v + b"x") for k, v in r.headers]), "headers"),
    (lambda r: replace(r, headers=[*r.headers, (r.headers[0][0], b"other")]), "headers"),
], ids=["key", "amount", "one byte more", "a header more", "a header's value",
        "a header repeated with another value"])
def test_one_byte_different_on_the_broker_is_a_forgery(change: Any, what: str) -> None:
    record = _record(_paid())
    letter = _letter(record)
    found = change(record)
    assert what in (replay.mismatch(letter["original"], found) or "")
    with pytest.raises(Forged, match="does not match the broker"):
        replay.verified(letter, "inventario", found)


def test_headers_kept_as_bytes_are_compared_in_order() -> None:
    record = _record(_paid(), headers=[("X-Bin", b"\xff\x00"), ("X-Message-ID", b"m")])
    letter = _letter(record)
    assert "raw" in letter["original"]
    assert replay.mismatch(letter["original"], record) is None
    swapped = replace(record, headers=list(reversed(record.headers)))
    assert replay.mismatch(letter["original"], swapped) == "its headers differ"


def test_a_value_kept_as_base64_is_compared_as_bytes() -> None:
    record = replace(_record(_paid()), value=b"\x00not text")
    original = _letter(record)["original"]
    assert original["value"]["encoding"] == "base64"
    assert replay.mismatch(original, record) is None
    other = replace(record, value=b"\x00not text!")
    assert replay.mismatch(original, other) == "its value differs"


def test_a_rebuilt_original_must_be_the_same_message_at_its_address() -> None:
    paid = _paid()
    record = _record(paid)
    # The service kept the message in its own form: not the record's bytes.
    letter = _letter(record, rebuilt=True, envelope=paid)
    assert letter["original"]["rebuilt"] is True
    assert replay.mismatch(letter["original"], record) is None
    another = _record(replace(paid, message_id=str(uuid.uuid4())))
    assert replay.mismatch(letter["original"], another) == "its message_id differs"


def test_a_letter_without_an_address_cannot_be_checked() -> None:
    original = dict(_letter(_record(_paid()))["original"], partition=None)
    with pytest.raises(CannotReplay, match="no Kafka address") as refused:
        replay.address(original)
    assert not isinstance(refused.value, Forged)


@pytest.mark.parametrize(("service", "topic", "event_type", "forged"), [
    ("pedidos", "order-events", "OrdenSolicitada", True),     # pedidos reads no order-events
    ("pagos", "payment-events", "PagoExitoso", True),         # nor pagos payment-events
    ("inventario", "inventory-events", "StockVerificado", True),
    ("pedidos", "inventory-events", "StockLiberado", False),  # read, but not consumed
])
def test_only_what_the_service_consumes_on_its_topic_is_replayed(
        service: str, topic: str, event_type: str, forged: bool) -> None:
    refused = replay.target_refusal(service, topic, event_type)
    assert refused is not None and isinstance(refused, Forged) == forged


def test_the_target_is_checked_on_the_broker_record_not_the_letters_claims() -> None:
    # A letter of pagos claiming a PagoExitoso, true to the broker: pagos never consumes it.
    record = _record(_paid())
    letter = _letter(record, service="pagos")
    with pytest.raises(Forged, match="pagos reads no topic"):
        replay.verified(letter, "pagos", record)
    for service in ("inventario", "pedidos"):
        replay.verified(letter, service, record)


def test_the_replay_is_the_broker_record_under_a_new_message_id() -> None:
    paid = _paid()
    record = _record(paid, headers=[*[(k, v.encode()) for k, v in paid.kafka_headers().items()],
                                    (h.REPLAY_FOR, b"pedidos"), (h.REPLAY_SIGNATURE, b"old:sig"),
                                    ("X-DLQ-Attempts", b"3")])
    plan = replay.build(record, "inventario", "dl-1")
    assert plan.topic == "payment-events" and plan.key == paid.saga_id
    assert plan.value["message_id"] != paid.message_id
    assert plan.value["metadata"] == {"replay_of": paid.message_id, "dead_letter_id": "dl-1"}
    assert plan.value["payload"] == paid.payload
    assert plan.headers[h.REPLAY_FOR] == "inventario"
    assert h.REPLAY_SIGNATURE not in plan.headers and "X-DLQ-Attempts" not in plan.headers
    assert plan.headers[h.REPLAY_OF] == paid.message_id


def test_the_claimed_record_of_a_letter_is_its_original() -> None:
    record = _record(_paid(), headers=[("X-Bin", b"\xff")])
    claimed = replay.claimed_record(_letter(record))
    assert (claimed.key, claimed.value, list(claimed.headers)) == (
        record.key, record.value, list(record.headers))
    assert base64.b64decode(_letter(record)["original"]["raw"]["headers"][0]["value"]) == b"\xff"


class _Recorder:
    def __init__(self, *, refuse: bool = False, claimed_first: str | None = None) -> None:
        self.forged: list[str] = []
        self.replayed: list[tuple[str, str]] = []
        self.refuse = refuse
        """The service refuses the claim (the letter was archived meanwhile)."""
        self.claimed_first = claimed_first
        """The message id another replay of the letter was claimed under first."""

    async def forged_(self, service: str, letter_id: str, reason: str) -> None:
        self.forged.append(reason)

    async def replayed_(self, service: str, letter_id: str, message_id: str, topic: str
                        ) -> str:
        self.replayed.append((message_id, topic))
        if self.refuse:
            raise replay.ReplayRefused("dead letter is archived")
        return self.claimed_first or message_id


class _Api:
    """``ActionRecorder`` over a ``_Recorder``."""

    def __init__(self, into: _Recorder) -> None:
        self.forged = into.forged_
        self.replayed = into.replayed_


async def _replay(monkeypatch: pytest.MonkeyPatch, letter: dict[str, Any], on_broker: BrokerRecord,
                  state: str = "open", dry_run: bool = False,
                  recorded: _Recorder | None = None
                  ) -> tuple[replay.Outcome, _Recorder, list[replay.Replay]]:
    sent: list[replay.Replay] = []

    async def read_record(kafka: Any, topic: str, partition: int, offset: int) -> BrokerRecord:
        assert (topic, partition, offset) == replay.address(letter["original"])
        return on_broker

    async def publish(plan: replay.Replay, kafka: Any) -> None:
        sent.append(plan)

    monkeypatch.setattr(replay, "read_record", read_record)
    monkeypatch.setattr(replay, "publish", publish)
    recorded = recorded or _Recorder()
    key = Ed25519PrivateKey.generate()
    outcome = await replay.replay_letter(
        "dl-1", {"state": state, "letter": letter}, "inventario", kafka=None,  # type: ignore[arg-type]
        signing_key=lambda: key, recorder=_Api(recorded), dry_run=dry_run)
    return outcome, recorded, sent


async def test_a_matching_letter_is_sent_as_the_broker_has_it_and_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    record = _record(_paid())
    outcome, recorded, sent = await _replay(monkeypatch, _letter(record), record)
    assert outcome.outcome == "replayed" and [p.topic for p in sent] == ["payment-events"]
    assert recorded.replayed == [(outcome.message_id, "payment-events")]
    assert h.REPLAY_SIGNATURE in sent[0].headers


async def test_a_forged_letter_sends_nothing_and_is_reported_but_not_on_a_dry_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    record = _record(_paid())
    letter = _letter(_record(_paid()))  # another message than the broker's
    outcome, recorded, sent = await _replay(monkeypatch, letter, record)
    assert outcome.outcome == "forged" and sent == [] and len(recorded.forged) == 1
    assert "does not match the broker" in recorded.forged[0]
    outcome, recorded, sent = await _replay(monkeypatch, letter, record, dry_run=True)
    assert outcome.outcome == "forged" and sent == [] and recorded.forged == []


@pytest.mark.parametrize("state", ["forged", "archived"])
async def test_a_forged_or_archived_letter_is_never_replayed(
        monkeypatch: pytest.MonkeyPatch, state: str) -> None:
    record = _record(_paid())
    outcome, recorded, sent = await _replay(monkeypatch, _letter(record), record, state=state)
    assert outcome.outcome == "refused" and state in outcome.detail and sent == []
    assert recorded.forged == recorded.replayed == []


async def test_a_replay_the_service_refuses_to_claim_is_never_sent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The letter was archived between the tool's read of its state and the replay: the claim,
    made before anything is published, is refused, and nothing goes out."""
    record = _record(_paid())
    outcome, recorded, sent = await _replay(monkeypatch, _letter(record), record,
                                            recorded=_Recorder(refuse=True))
    assert outcome.outcome == "refused" and "archived" in outcome.detail
    assert sent == [] and len(recorded.replayed) == 1


async def test_a_letter_replayed_already_goes_out_under_its_first_claims_message_id(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two operators replaying one letter (or one running it again after a crash): the second
    publishes under the message id the first claimed, signed for it, so the consumer's inbox
    takes the letter's original once."""
    record = _record(_paid())
    first = "0b2c4a8e-1f3d-4c5b-9a6e-7d8f9e0a1b2c"
    outcome, _, sent = await _replay(monkeypatch, _letter(record), record,
                                     recorded=_Recorder(claimed_first=first))
    assert outcome.outcome == "replayed" and outcome.message_id == first
    [plan] = sent
    assert plan.value["message_id"] == plan.headers[h.MESSAGE_ID] == first
    assert h.REPLAY_SIGNATURE in plan.headers
