"""Replaying a dead letter, trusting nothing but the broker.

A dead letter is a row of a service's outbox, and whoever can write that outbox (the service's
app role, that of its internet-facing API) can write one: its "original" is only a claim. So a
replay believes the letter for one thing, where the original sits (topic, partition, offset),
and re-reads it there from Kafka (``read_record``: assign and seek, no consumer group). The
record found must be the letter's original byte for byte: key, value and every header
(``mismatch``). A letter of work a message asked for (pagos' charge given up on: ``rebuilt``)
keeps a copy rebuilt from what the service kept, which is not those bytes: the record at its
address must then be the same message (message id, saga, event type, key). Either way, what is
sent is the broker's record, never the letter's copy. And only an event the target service
consumes, on the topic it travels on, is replayed (``saga_contracts.topology``), whatever the
letter says.

A letter that does not match the broker is forged (``Forged``): the tool refuses it, sends
nothing, and reports it to the owning service, which marks it so it can never be replayed and
counts it in ``saga_forged_replays_total`` (the ForgedReplay alert). A letter that cannot be
checked (its record is gone from the topic's retention, it keeps no address) is refused
(``CannotReplay``) and stays open.

The replay gets a new message id (the consumer's inbox recorded the original as dead-lettered
and would swallow it), points back at the original in ``metadata.replay_of`` and the
``X-Replay-Of`` header, and is addressed with ``X-Replay-For`` to the one consumer that gave up
on it: the topic's other consumers processed the original and skip it. They believe that
address, and the receiving service believes it is a replay, only when the operator signed it
(``signed``; ``saga_contracts.replay_signature``).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saga_contracts import headers as h
from saga_contracts import registry, topology
from saga_contracts.redaction import redact
from saga_contracts.replay_signature import Signed, sign
from sagakit.kafka import client_security
from sagakit.kafka_topics import admin_client
from sagakit.settings import KafkaClientSettings

# How long a replay waits for the broker to hand over the record it re-reads.
READ_TIMEOUT_S = 10.0


class CannotReplay(Exception):
    """The letter cannot be replayed as it is (not forged: it stays open)."""


class Forged(CannotReplay):
    """The letter does not match the broker, or names what its service never consumes."""


@dataclass(frozen=True)
class BrokerRecord:
    """A record as Kafka gives it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]]


@dataclass(frozen=True)
class Replay:
    topic: str
    key: str
    value: dict[str, Any]
    headers: dict[str, str]

    def record_key(self) -> bytes:
        return self.key.encode()

    def record_value(self) -> bytes:
        """The bytes published, and signed."""
        return json.dumps(self.value).encode()


# ------------------------------------------------------------------ what the letter claims


def address(original: Mapping[str, Any]) -> tuple[str, int, int]:
    """Where the letter says its original sits; ``CannotReplay`` when it keeps no address."""
    topic, partition, offset = (original.get("topic"), original.get("partition"),
                                original.get("offset"))
    if not isinstance(topic, str) or not isinstance(partition, int) \
            or not isinstance(offset, int) or isinstance(partition, bool) \
            or isinstance(offset, bool):
        raise CannotReplay("the letter keeps no Kafka address of its original (topic, "
                           "partition, offset): nothing to check it against")
    return topic, partition, offset


def _b64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise Forged("the letter's original is malformed")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise Forged("the letter's original is malformed (bad base64)") from None


def claimed_value(original: Mapping[str, Any]) -> bytes:
    value = original.get("value")
    if not isinstance(value, Mapping) or not isinstance(value.get("data"), str):
        raise Forged("the letter's original keeps no value")
    if value.get("encoding") == "utf-8":
        return str(value["data"]).encode("utf-8")
    if value.get("encoding") == "base64":
        return _b64(value["data"])
    raise Forged("the letter's original value has an unknown encoding")


def claimed_key(original: Mapping[str, Any]) -> bytes | None:
    raw = original.get("raw")
    if isinstance(raw, Mapping):
        return None if raw.get("key") is None else _b64(raw["key"])
    key = original.get("key")
    if key is None:
        return None
    if not isinstance(key, str):
        raise Forged("the letter's original key is malformed")
    return key.encode("utf-8")


def claimed_headers(original: Mapping[str, Any]) -> list[tuple[str, bytes]] | dict[str, bytes]:
    """The original's headers: as a list (bytes kept in ``raw``: every header, in order) or as
    a mapping (the letter keeps text headers by name, so their order is not known)."""
    raw = original.get("raw")
    if isinstance(raw, Mapping):
        listed = raw.get("headers")
        if not isinstance(listed, list):
            raise Forged("the letter's original headers are malformed")
        out = []
        for entry in listed:
            if not isinstance(entry, Mapping):
                raise Forged("the letter's original headers are malformed")
            out.append((_b64(entry.get("name")).decode("utf-8", "surrogatepass"),
                        _b64(entry.get("value"))))
        return out
    headers = original.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise Forged("the letter's original headers are malformed")
    return {k: v.encode("utf-8") for k, v in headers.items()}


def claimed_record(letter: Mapping[str, Any]) -> BrokerRecord:
    """The record the broker holds if ``letter`` tells the truth about its original (tests and
    tools that know it does; a replay reads the broker's instead)."""
    original = letter.get("original")
    if not isinstance(original, Mapping):
        raise CannotReplay("the letter keeps no original message; replay it by hand")
    headers = claimed_headers(original)
    return BrokerRecord(str(original.get("topic")), int(original.get("partition") or 0),
                        int(original.get("offset") or 0), claimed_key(original),
                        claimed_value(original),
                        list(headers.items()) if isinstance(headers, dict) else headers)


# ------------------------------------------------------------------ checks


def mismatch(original: Mapping[str, Any], record: BrokerRecord) -> str | None:
    """None when ``record`` is the letter's ``original`` byte for byte; else what differs."""
    if not original.get("rebuilt"):
        if claimed_key(original) != record.key:
            return "its key differs"
        if claimed_value(original) != (record.value or b""):
            return "its value differs"
        claimed = claimed_headers(original)
        if isinstance(claimed, list):
            if claimed != list(record.headers):
                return "its headers differ"
        elif dict(record.headers) != claimed:
            # A letter keeps text headers by name, the last of a repeated one (as the replay
            # built from the record does): what is sent is the broker's record anyway.
            return "its headers differ"
        return None
    # A copy rebuilt by the service: the record at its address must be the same message.
    try:
        claimed_envelope = json.loads(claimed_value(original))
        found = json.loads(record.value or b"")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return "its value is not the same message"
    if not isinstance(claimed_envelope, dict) or not isinstance(found, dict):
        return "its value is not the same message"
    for name in ("message_id", "saga_id", "event_type"):
        if claimed_envelope.get(name) != found.get(name):
            return f"its {name} differs"
    if claimed_key(original) != record.key:
        return "its key differs"
    return None


def target_refusal(service: str, topic: str, event_type: str) -> CannotReplay | None:
    """Why an ``event_type`` on ``topic`` is not replayed to ``service`` (the contract's
    topology, not the letter, says what it consumes): forged when ``service`` does not even
    read ``topic`` (none of its letters can be of it)."""
    if topic not in topology.topics_read(service):
        return Forged(f"{service} reads no topic {topic!r}")
    why = topology.replayable(service, topic, event_type)
    return None if why is None else CannotReplay(why)


# ------------------------------------------------------------------ the broker


async def read_record(kafka: KafkaClientSettings, topic: str, partition: int, offset: int,
                      timeout_s: float = READ_TIMEOUT_S) -> BrokerRecord:
    """The record at ``topic``[``partition``]@``offset``, read without a consumer group.
    ``Forged`` when the topic has no such partition or offset; ``CannotReplay`` when the
    record is gone (the topic's retention deleted it)."""
    if partition not in await _partitions_of(kafka, topic):
        raise Forged(f"no partition {partition} of {topic!r} on the broker")
    consumer = AIOKafkaConsumer(**client_security(kafka), group_id=None,
                                enable_auto_commit=False, auto_offset_reset="none")
    await consumer.start()
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        start = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]
        if offset >= end or offset < 0:
            raise Forged(f"no record at {topic}[{partition}]@{offset} (the partition ends "
                         f"at {end})")
        if offset < start:
            raise CannotReplay(f"{topic}[{partition}]@{offset} is gone from the broker (its "
                               f"retention starts at {start}): the original cannot be checked")
        consumer.seek(tp, offset)
        batch = await consumer.getmany(tp, timeout_ms=int(timeout_s * 1000), max_records=1)
        records = batch.get(tp) or []
        if not records:
            raise CannotReplay(f"the broker gave no record at {topic}[{partition}]@{offset} "
                               f"within {timeout_s:.0f} s")
        got = records[0]
        if got.offset != offset:
            raise Forged(f"no record at {topic}[{partition}]@{offset} (the next is at "
                         f"{got.offset})")
        return BrokerRecord(topic, partition, offset, got.key, got.value,
                            [(k, v or b"") for k, v in got.headers])
    finally:
        await consumer.stop()


async def _partitions_of(kafka: KafkaClientSettings, topic: str) -> set[int]:
    """The partitions of ``topic`` (none when it does not exist, or this principal may not
    see it)."""
    admin = admin_client(kafka)
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return {p["partition"] for t in described if t["topic"] == topic and not t.get("error_code", 0)
            for p in t["partitions"]}


# ------------------------------------------------------------------ the replay


def verified(letter: Mapping[str, Any], service: str, record: BrokerRecord) -> None:
    """Raises ``Forged`` or ``CannotReplay`` unless ``record`` (read at the letter's address)
    is the letter's original and an event ``service`` consumes on its topic."""
    original = letter.get("original")
    if not isinstance(original, Mapping):
        raise CannotReplay("the letter keeps no original message; replay it by hand")
    differs = mismatch(original, record)
    if differs is not None:
        raise Forged(f"the letter does not match the broker: the record at {record.topic}"
                     f"[{record.partition}]@{record.offset} is not its original ({differs})")
    try:
        envelope = json.loads(record.value or b"")
        event_type = envelope["event_type"]
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError):
        raise CannotReplay("the original is not an event envelope") from None
    refused = target_refusal(service, record.topic, str(event_type))
    if refused is not None:
        raise refused


def build(record: BrokerRecord, service: str, dead_letter_id: str,
          fixed_payload: dict[str, Any] | None = None, message_id: str | None = None
          ) -> Replay:
    """The replay of the broker's ``record`` for ``service``, under a new message id, or
    ``message_id`` (the one its replay was claimed under first); ``fixed_payload``: the
    operator's fix of its payload. Not signed yet (``signed``)."""
    try:
        envelope = json.loads((record.value or b"").decode("utf-8"))
    except UnicodeDecodeError:
        raise CannotReplay("the original bytes are not text; nothing to replay as an "
                           "event") from None
    except json.JSONDecodeError as exc:
        raise CannotReplay(f"the original is not JSON ({exc}); fix it by hand") from exc
    if not isinstance(envelope, dict) or "event_type" not in envelope:
        raise CannotReplay("the original is not an event envelope")
    try:
        headers_in = {k: v.decode("utf-8") for k, v in record.headers}
        key = None if record.key is None else record.key.decode("utf-8")
    except UnicodeDecodeError:
        raise CannotReplay("the original's key or headers are not text; fix it by "
                           "hand") from None
    if fixed_payload is not None:
        envelope["payload"] = fixed_payload
    try:
        registry.validate(envelope["event_type"], envelope.get("schema_version", ""),
                          envelope.get("payload"))
    except (registry.SchemaViolation, registry.UnknownEventType) as exc:
        raise CannotReplay(f"still invalid, give a fixed payload with --payload: {exc}") from exc
    original_id = str(envelope.get("message_id"))
    envelope["message_id"] = message_id or str(uuid.uuid4())
    envelope["metadata"] = {**(envelope.get("metadata") or {}), "replay_of": original_id,
                            "dead_letter_id": dead_letter_id}
    # An earlier replay's address and signature are of another record.
    headers = {k: v for k, v in headers_in.items()
               if not k.startswith("X-DLQ-") and k not in (h.REPLAY_SIGNATURE, h.REPLAY_FOR)}
    headers.update({h.MESSAGE_ID: envelope["message_id"], h.REPLAY_OF: original_id,
                    h.REPLAY_FOR: service, h.EVENT_TYPE: envelope["event_type"],
                    h.SAGA_ID: envelope.get("saga_id", "")})
    return Replay(record.topic, key or envelope.get("saga_id", ""), envelope, headers)


def signed(replay: Replay, key: Ed25519PrivateKey) -> Replay:
    """``replay`` with the operator's signature of it, which makes the service it is addressed
    to the only one to handle it, and the only thing that service takes for a replay."""
    what = Signed(replay_for=replay.headers[h.REPLAY_FOR], topic=replay.topic,
                  key=replay.record_key(), value=replay.record_value(),
                  message_id=replay.headers[h.MESSAGE_ID], saga_id=replay.headers[h.SAGA_ID])
    return replace(replay, headers={**replay.headers, h.REPLAY_SIGNATURE: sign(key, what)})


async def publish(replay: Replay, kafka: KafkaClientSettings) -> None:
    producer = AIOKafkaProducer(**client_security(kafka), acks="all", enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(replay.topic, replay.record_value(),
                                     key=replay.record_key(),
                                     headers=[(k, v.encode()) for k, v in replay.headers.items()])
    finally:
        await producer.stop()


def verdict(letter: Mapping[str, Any], service: str, record: BrokerRecord) -> dict[str, Any]:
    """What the broker check found, said for the operator, once ``verified`` passed."""
    original = letter.get("original") or {}
    event_type = json.loads(record.value or b"{}").get("event_type")
    return {
        "found_at": {"topic": record.topic, "partition": record.partition,
                     "offset": record.offset},
        "match": ("the same message as the service's rebuilt copy (message id, saga, event "
                  "type, key)") if original.get("rebuilt") else
                 "byte for byte: key, value and every header",
        "topology": f"allowed: {service} consumes {event_type} on {record.topic}",
    }


# ------------------------------------------------------------------ one letter, end to end


class ReplayRefused(Exception):
    """The owning service refused the replay's claim (the letter is archived or forged, or
    gone): nothing may be published for it."""


class ActionRecorder(Protocol):
    """Records, through the owning service's API as the operator, what a replay does."""

    async def forged(self, service: str, letter_id: str, reason: str) -> None: ...

    async def replayed(self, service: str, letter_id: str, message_id: str, topic: str
                       ) -> str:
        """Claims the letter's replay before it is published; returns the message id to
        publish it under (the one given, or the first claim's). ``ReplayRefused``."""
        ...


@dataclass
class Outcome:
    """What became of one letter: ``replayed``, ``would_replay`` (dry run), ``refused`` (left
    as it was) or ``forged`` (reported, unless a dry run)."""

    id: str
    service: str
    outcome: str
    detail: str = ""
    plan: dict[str, Any] | None = field(default=None)
    """What was (or would be) sent, the payment token masked."""
    message_id: str | None = None
    broker_check: dict[str, Any] | None = field(default=None)
    """The broker check's verdict, when it passed: where the original was found, how it
    matched the letter, and that the target service consumes it (``verdict``)."""

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}


async def replay_letter(letter_id: str, kept: Mapping[str, Any], service: str, *,
                        kafka: KafkaClientSettings, signing_key: Callable[[], Ed25519PrivateKey],
                        recorder: ActionRecorder, dry_run: bool = False,
                        fixed_payload: dict[str, Any] | None = None,
                        only_open: bool = False) -> Outcome:
    """Replays ``service``'s letter ``letter_id`` (``kept``: its state and the letter, as the
    service's ``GET /operator/dead-letters/{id}`` gives them) if it matches the broker; a
    forged one is reported through ``recorder``, a replay recorded there (neither on a dry
    run). ``only_open``: a letter acted on already is left alone (group replays)."""
    state = kept.get("state")
    if state == "forged":
        return Outcome(letter_id, service, "refused",
                       "the letter is marked forged: it is never replayed")
    if state == "archived" or (only_open and state != "open"):
        return Outcome(letter_id, service, "refused", f"the letter is {state}")
    letter = kept.get("letter") or {}
    try:
        topic, partition, offset = address(letter.get("original") or {})
        record = await read_record(kafka, topic, partition, offset)
        verified(letter, service, record)
        plan = signed(build(record, service, letter_id, fixed_payload), signing_key())
    except Forged as exc:
        reason = f"the dead letter does not match the broker: {exc}"
        if not dry_run:
            await recorder.forged(service, letter_id, reason[:500])
        return Outcome(letter_id, service, "forged", reason)
    except CannotReplay as exc:
        return Outcome(letter_id, service, "refused", str(exc))
    shown = {"topic": plan.topic, "key": plan.key, "headers": plan.headers,
             "value": redact(plan.value)}
    message_id = str(plan.value["message_id"])
    check = verdict(letter, service, record)
    if dry_run:
        return Outcome(letter_id, service, "would_replay", plan=shown, message_id=message_id,
                       broker_check=check)
    # Claimed before it is published: a letter archived meanwhile is never sent, and two
    # replays of one letter (two operators, or a run again after a crash) go out under the
    # first claim's message id, which the consumer's inbox takes once.
    try:
        claimed = await recorder.replayed(service, letter_id, message_id, plan.topic)
    except ReplayRefused as exc:
        return Outcome(letter_id, service, "refused", f"the service refused the replay: {exc}")
    if claimed != message_id:
        plan = signed(build(record, service, letter_id, fixed_payload, claimed), signing_key())
        message_id = claimed
        shown = {"topic": plan.topic, "key": plan.key, "headers": plan.headers,
                 "value": redact(plan.value)}
    await publish(plan, kafka)
    return Outcome(letter_id, service, "replayed", plan=shown, message_id=message_id,
                   broker_check=check)
