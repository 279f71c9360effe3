"""Replaying a dead letter safely.

The replayed message gets a new message id (the consumer's inbox recorded the original as
dead-lettered and would swallow it), points back at the original in ``metadata.replay_of`` and
the ``X-Replay-Of`` header, and is addressed with ``X-Replay-For`` to the one consumer that gave
up on it: the other consumers of the topic processed the original already and skip it. They
believe that address only when the operator signed the replay (``signed``, in
``X-Replay-Signature``; ``saga_contracts.replay_signature``): anyone who can write to the topic
could write the header.

Every service's dead letters have one format (``sagakit.dead_letters``), whoever wrote them: the
consumer loop, for a message it gave up on, or pagos, for a charge the gateway never made. The
original of pagos' letter is the StockVerificado that asked for the charge; replayed, pagos
makes the charge due again if nothing has decided the payment since (``pagos.start_charge``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

from aiokafka import AIOKafkaProducer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saga_contracts import headers as h
from saga_contracts import registry
from saga_contracts.replay_signature import Signed, sign
from sagakit.kafka import client_security
from sagakit.settings import KafkaClientSettings


class CannotReplay(Exception):
    pass


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


def signed(replay: Replay, key: Ed25519PrivateKey) -> Replay:
    """``replay`` with the operator's signature of it, which makes the service it is addressed
    to the only one to handle it."""
    what = Signed(replay_for=replay.headers[h.REPLAY_FOR], topic=replay.topic,
                  key=replay.record_key(), value=replay.record_value(),
                  message_id=replay.headers[h.MESSAGE_ID], saga_id=replay.headers[h.SAGA_ID])
    return replace(replay, headers={**replay.headers, h.REPLAY_SIGNATURE: sign(key, what)})


def build(record: dict[str, Any], service: str, dead_letter_id: str,
          fixed_payload: dict[str, Any] | None = None) -> Replay:
    original = record.get("original") or {}
    raw = original.get("value")
    if not isinstance(raw, dict):
        raise CannotReplay("the letter keeps no original message (written before dead letters "
                           "had one format); replay it by hand")
    if raw.get("encoding") != "utf-8":
        raise CannotReplay("the original bytes are not text; nothing to replay as an event")
    if original.get("raw"):
        raise CannotReplay("the original's key or headers are not text (kept as bytes in "
                           "original.raw); fix it by hand")
    try:
        envelope = json.loads(raw["data"])
    except json.JSONDecodeError as exc:
        raise CannotReplay(f"the original is not JSON ({exc}); fix it by hand") from exc
    if not isinstance(envelope, dict) or "event_type" not in envelope:
        raise CannotReplay("the original is not an event envelope")
    if fixed_payload is not None:
        envelope["payload"] = fixed_payload
    try:
        registry.validate(envelope["event_type"], envelope.get("schema_version", ""),
                          envelope.get("payload"))
    except (registry.SchemaViolation, registry.UnknownEventType) as exc:
        raise CannotReplay(f"still invalid, give a fixed payload with --payload: {exc}") from exc
    original_id = str(envelope.get("message_id"))
    envelope["message_id"] = str(uuid.uuid4())
    envelope["metadata"] = {**(envelope.get("metadata") or {}), "replay_of": original_id,
                            "dead_letter_id": dead_letter_id}
    # An earlier replay's signature is of another record.
    headers = {k: v for k, v in (original.get("headers") or {}).items()
               if not k.startswith("X-DLQ-") and k != h.REPLAY_SIGNATURE}
    headers.update({h.MESSAGE_ID: envelope["message_id"], h.REPLAY_OF: original_id,
                    h.REPLAY_FOR: service, h.EVENT_TYPE: envelope["event_type"],
                    h.SAGA_ID: envelope.get("saga_id", "")})
    return Replay(original["topic"], original.get("key") or envelope.get("saga_id", ""),
                  envelope, headers)


async def publish(replay: Replay, kafka: KafkaClientSettings) -> None:
    producer = AIOKafkaProducer(**client_security(kafka), acks="all", enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(replay.topic, replay.record_value(),
                                     key=replay.record_key(),
                                     headers=[(k, v.encode()) for k, v in replay.headers.items()])
    finally:
        await producer.stop()
