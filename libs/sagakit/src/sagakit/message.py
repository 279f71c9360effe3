"""An event as its handler gets it: the envelope as it came over the wire, and its payload
parsed into its event type's model (``saga_contracts.events``).

The consumer parses the payload once, after its JSON Schema admitted it
(``sagakit.consumer.admission``). The envelope stays the wire form, its payload the dict it
came as: dead letters, replays and tracing work on it, and a handler that keeps the event
(pagos keeps the one that asked for a charge) keeps it as it came, fields of a newer schema
version included, which the model drops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from saga_contracts.events import parse_as
from saga_contracts.events.base import Event
from sagakit.envelope import Envelope

E = TypeVar("E", bound=Event, covariant=True)
M = TypeVar("M", bound=Event)


@dataclass(frozen=True, slots=True)
class Message(Generic[E]):
    envelope: Envelope
    payload: E
    replayed: bool = False
    """A replay the operator signed for this service (``sagakit.consumer.replays``): the only
    way a handler may tell one. The envelope's ``metadata.replay_of`` is the sender's word."""
    address: tuple[str, int, int] | None = None
    """Where the record sat: topic, partition, offset (None for a message not read from
    Kafka)."""

    @staticmethod
    def parse(envelope: Envelope, model: type[M], *, replayed: bool = False,
              address: tuple[str, int, int] | None = None) -> Message[M]:
        """``envelope`` with its payload as ``model``; raises ``registry.SchemaViolation`` for a
        payload the model refuses."""
        return Message(envelope, parse_as(model, envelope.payload), replayed, address)

    # What handlers read of the envelope, so that they need not reach into it.

    @property
    def saga_id(self) -> str:
        return self.envelope.saga_id

    @property
    def message_id(self) -> str:
        return self.envelope.message_id

    @property
    def event_type(self) -> str:
        return self.envelope.event_type

    @property
    def source_service(self) -> str:
        return self.envelope.source_service

    @property
    def span_id(self) -> str:
        return self.envelope.span_id

    @property
    def metadata(self) -> dict[str, Any]:
        return self.envelope.metadata
