"""The event envelope (docs/standard.md#the-event-envelope) and its mapping to a Kafka record.

A record's value is the whole envelope as JSON; its key is the saga id, so every event of one
saga lands in one partition; its headers repeat the tracing metadata (docs/standard.md#saga-and-span-ids).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from saga_contracts import headers as h
from sagakit import jsonio
from sagakit.ids import time_ordered_id


class UndecodableMessage(ValueError):
    """The bytes are not an envelope: not JSON, or missing the tracing metadata."""


def new_message_id() -> str:
    """A message id ordered by creation time: every event a service handles or writes adds a
    key to the unique indexes of its inbox and outbox (``sagakit.ids``)."""
    return str(time_ordered_id())


def new_span_id() -> str:
    """A span id of the standard's hierarchy (docs/standard.md#saga-and-span-ids): one per step, a
    message's or the HTTP request's that started a saga. Its own id space, whether or not
    OpenTelemetry traces."""
    return str(uuid.uuid4())


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Envelope:
    message_id: str
    saga_id: str
    span_id: str
    parent_span_id: str | None
    schema_version: str
    timestamp: str
    source_service: str
    event_type: str
    payload: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, *, saga_id: str, event_type: str, schema_version: str, source_service: str,
            payload: dict[str, Any], parent_span_id: str | None = None,
            metadata: dict[str, Any] | None = None) -> Envelope:
        return cls(
            message_id=new_message_id(),
            saga_id=saga_id,
            span_id=new_span_id(),
            parent_span_id=parent_span_id,
            schema_version=schema_version,
            timestamp=utc_now_iso(),
            source_service=source_service,
            event_type=event_type,
            payload=payload,
            metadata=metadata or {},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "saga_id": self.saga_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "schema_version": self.schema_version,
            "timestamp": self.timestamp,
            "source_service": self.source_service,
            "event_type": self.event_type,
            "payload": self.payload,
            "metadata": self.metadata,
        }

    def kafka_headers(self, traceparent: str | None = None,
                      tracestate: str | None = None) -> dict[str, str]:
        out = {
            h.SAGA_ID: self.saga_id,
            h.SPAN_ID: self.span_id,
            h.PARENT_SPAN_ID: self.parent_span_id or "",
            h.MESSAGE_ID: self.message_id,
            h.EVENT_TYPE: self.event_type,
            h.SCHEMA_VERSION: self.schema_version,
            h.SOURCE_SERVICE: self.source_service,
        }
        if traceparent:
            out[h.TRACEPARENT] = traceparent
            if tracestate:
                out[h.TRACESTATE] = tracestate
        return out

    @classmethod
    def from_record_value(cls, value: bytes | None) -> Envelope:
        if value is None:
            raise UndecodableMessage("empty record value")
        try:
            doc = jsonio.loads(value)
        except jsonio.DecodeError as exc:
            raise UndecodableMessage(f"value is not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise UndecodableMessage("value is not a JSON object")
        required = ("message_id", "saga_id", "span_id", "schema_version", "timestamp",
                    "source_service", "event_type", "payload")
        missing = [k for k in required if k not in doc]
        if missing:
            raise UndecodableMessage(f"envelope lacks {', '.join(missing)}")
        if not isinstance(doc["payload"], dict):
            raise UndecodableMessage("payload is not a JSON object")
        try:
            uuid.UUID(str(doc["message_id"]))
            uuid.UUID(str(doc["saga_id"]))
        except ValueError as exc:
            raise UndecodableMessage("message_id and saga_id must be UUIDs") from exc
        return cls(
            message_id=str(doc["message_id"]),
            saga_id=str(doc["saga_id"]),
            span_id=str(doc["span_id"]),
            parent_span_id=doc.get("parent_span_id") or None,
            schema_version=str(doc["schema_version"]),
            timestamp=str(doc["timestamp"]),
            source_service=str(doc["source_service"]),
            event_type=str(doc["event_type"]),
            payload=doc["payload"],
            metadata=doc.get("metadata") or {},
        )


def decode_headers(raw: list[tuple[str, bytes]] | tuple[tuple[str, bytes], ...] | None
                   ) -> dict[str, str]:
    return {k: (v.decode(errors="replace") if v is not None else "") for k, v in (raw or [])}


def encode_headers(headers: dict[str, str]) -> list[tuple[str, bytes]]:
    return [(k, v.encode()) for k, v in headers.items()]
