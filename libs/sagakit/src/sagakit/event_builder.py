"""The envelope of an event a service emits: its model written as the payload and checked against
the latest schema, its saga, span and correlation inherited from the message being handled.

The real unit of work (``sagakit.store.unit_of_work``) and its in-memory twin
(``sagakit.fakes.FakeUnitOfWork``) both build their events here, so a use case's unit test sees
the same checks as production.
"""

from __future__ import annotations

from typing import Any

from saga_contracts import registry
from saga_contracts.events.base import Event
from sagakit.context import current_message
from sagakit.envelope import Envelope


def build_event(service: str, event: Event, *,
                saga_id: str | None = None, metadata: dict[str, Any] | None = None,
                parent_span_id: str | None = None) -> Envelope:
    """The envelope of ``event`` as ``service`` emits it, its payload (``to_payload``) checked
    against the latest schema of its event type: the contract check, which the model mirrors but
    does not replace. Saga id, parent span and the correlation metadata come from the message being
    handled (docs/standard.md#saga-and-span-ids); work that runs outside a handler (a timer, a
    retry) names the saga and its parent span itself."""
    cause = current_message.get()
    if saga_id is None:
        if cause is None:
            raise ValueError("saga_id is required outside a message handler")
        saga_id = cause.saga_id
    event_type = event.event_type
    payload = event.to_payload()
    schema = registry.latest(event_type)
    registry.validate(event_type, schema.version, payload)
    meta = dict(metadata or {})
    if cause is not None:
        meta.setdefault("causation_id", cause.message_id)
        for k in ("correlation_id", "user_id", "channel"):
            if k in cause.metadata:
                meta.setdefault(k, cause.metadata[k])
    return Envelope.new(saga_id=saga_id, event_type=event_type, schema_version=schema.version,
                        source_service=service, payload=payload,
                        parent_span_id=cause.span_id if cause else parent_span_id,
                        metadata=meta)

