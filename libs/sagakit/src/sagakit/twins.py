"""One event published in several versions at once (the standard's dual publication of a breaking
change: ``OrdenSolicitada`` and ``OrdenSolicitada_v4``), and a saga's event handled once whichever
version a consumer reads, or reads first.

The producer emits the versions in one unit of work, so they reach the outbox with one commit;
the first is an envelope as any, each other a *twin* that names the first's message id in its
metadata (``twin_of``). A consumer claims a message in its inbox under that id
(``claim_id``): the first twin it handles claims it, and any other version of the same event
after it, whatever its type, is a duplicate and rolled back, as a message delivered twice is.
So a consumer that reads both types, or that moved from one to the other while the saga's
records were on the topic, handles the saga's event once (docs/operations.md#evolving-an-event-schema).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from saga_contracts.events.base import Event
from sagakit.envelope import Envelope
from sagakit.ports import UnitOfWorkPort

TWIN_OF = "twin_of"
"""The metadata key of a twin: the message id of the first version of the same event."""

# A message id is a UUID; what a record's metadata says is the sender's word and is used only
# if it looks like one (a longer text would be a key of the inbox nobody else writes).
_MAX_ID_LENGTH = 64


def versions_setting(value: str, known: Sequence[str]) -> list[str]:
    """A setting naming versions of one event, comma-separated (``OrdenSolicitada,
    OrdenSolicitada_v4``): each one of ``known``, each once, one at least; ValueError if not."""
    versions = [v.strip() for v in value.split(",") if v.strip()]
    if not versions or set(versions) - set(known) or len(set(versions)) != len(versions):
        raise ValueError(f"one or more of {', '.join(known)}, each once; not {value!r}")
    return versions


def claim_id(envelope: Envelope) -> str:
    """The id the consumer claims ``envelope`` under in its inbox: its twin's first message id
    if it is a twin, else its own."""
    first = envelope.metadata.get(TWIN_OF)
    if isinstance(first, str) and 0 < len(first) <= _MAX_ID_LENGTH:
        return first
    return envelope.message_id


def emit_versions(uow: UnitOfWorkPort, versions: Sequence[Event], *,
                  saga_id: str | None = None, metadata: dict[str, Any] | None = None,
                  parent_span_id: str | None = None) -> list[Envelope]:
    """Queues each of ``versions`` (one event in the versions the service publishes, at least
    one) as ``uow.emit`` does; the second and later as twins of the first."""
    if not versions:
        raise ValueError("an event is published in one version at least")
    first = uow.emit(versions[0], saga_id=saga_id, metadata=metadata,
                     parent_span_id=parent_span_id)
    twins = [uow.emit(version, saga_id=saga_id, parent_span_id=parent_span_id,
                      metadata={**(metadata or {}), TWIN_OF: first.message_id})
             for version in versions[1:]]
    return [first, *twins]
