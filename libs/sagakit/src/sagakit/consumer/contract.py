"""Where an event this service handles must come from to be believed: its schema's topic
(``x-topic``), its schema's producer (``x-producer``) as the envelope's ``source_service``, and
keyed by its saga id, as the relay publishes it.

In a choreographed saga the events are the authority: any process that reaches the broker could
write a ``PagoExitoso`` and get goods allocated unpaid. Who may write to which topic is Kafka's
to enforce (authentication, ACLs); this is the consumer's defence in depth, and a record that
breaks it is dead-lettered as ``contract_violation`` before its payload is even validated. A
record keyed otherwise than by its saga lands in another partition than the saga's other events
and loses their order, so it is refused too; so is an ``X-Saga-ID`` header naming another saga
than the envelope (a record without the header, as tests and tools write them, is not).

``sagactl replay`` writes a replay on the original's topic, keyed as the original was (or by the
saga id), with the envelope's saga id in ``X-Saga-ID``: a replay of a record that kept the
contract keeps it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from saga_contracts import registry
from sagakit.consumer.records import RawRecord
from sagakit.envelope import Envelope

# How much of a text the sender chose (a topic, a service name, a key) a refusal quotes.
_QUOTED_CHARS = 80


class ContractViolation(ValueError):
    """A record of a handled event that did not come the way its contract says it comes."""


@dataclass(frozen=True, slots=True)
class Origin:
    """The topic an event type is published on and the service that publishes it."""

    topic: str
    producer: str


def origins_of(event_types: Iterable[str]) -> dict[str, Origin]:
    """Each event type's origin as the catalogue gives it: its latest schema's, the topic
    ``topics_of`` subscribes to."""
    out: dict[str, Origin] = {}
    for event_type in event_types:
        schema = registry.latest(event_type)
        out[event_type] = Origin(schema.topic, schema.producer)
    return out


def _quoted(text: str) -> str:
    return repr(text if len(text) <= _QUOTED_CHARS else text[:_QUOTED_CHARS] + "…")


def _key_of(raw: RawRecord) -> str:
    if raw.key is None:
        return "no key"
    return "key " + _quoted(raw.key.decode(errors="replace"))


def violation(raw: RawRecord, envelope: Envelope, saga_id_header: str | None,
              origin: Origin) -> ContractViolation | None:
    """What in ``raw`` breaks the contract of its event type (``origin``), or None. It says what
    was expected and what came; nothing of the payload."""
    saga_id = envelope.saga_id
    if (raw.topic == origin.topic and envelope.source_service == origin.producer
            and raw.key == saga_id.encode() and (not saga_id_header or saga_id_header == saga_id)):
        return None
    came = []
    if raw.topic != origin.topic:
        came.append(f"on topic {_quoted(raw.topic)}")
    if envelope.source_service != origin.producer:
        came.append(f"from {_quoted(envelope.source_service)}")
    if raw.key != saga_id.encode():
        came.append(f"with {_key_of(raw)}")
    if saga_id_header and saga_id_header != saga_id:
        came.append(f"with X-Saga-ID {_quoted(saga_id_header)}")
    return ContractViolation(
        f"{envelope.event_type} comes on topic {origin.topic!r} from {origin.producer!r}, keyed "
        f"(and X-Saga-ID) by its saga id {saga_id}; this one came {', '.join(came)}")
