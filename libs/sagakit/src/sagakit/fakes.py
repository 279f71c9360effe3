"""In-memory stand-ins for unit tests of use cases: no database, no broker.

``FakeUnitOfWork`` satisfies ``sagakit.ports.UnitOfWorkPort``. Its events are built exactly as
the real unit of work builds them (``build_event``: the payload checked against the event's
schema, saga id and causation taken from the message being handled), so a use case that emits a
payload its schema refuses fails its unit test as it would fail in production.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from saga_contracts.events.base import Event
from sagakit.envelope import Envelope
from sagakit.event_builder import build_event


class FakeUnitOfWork:
    def __init__(self, service: str = "test", *, commit_result: bool = True) -> None:
        self.service = service
        self.commit_result = commit_result
        """What ``commit`` returns: False plays a guarded write whose guard found nothing."""
        self.emitted: list[Envelope] = []
        self.committed = False
        self.commits = 0
        self._after_commit: list[Callable[[], None]] = []

    def emit(self, event: Event, *, saga_id: str | None = None,
             metadata: dict[str, Any] | None = None,
             parent_span_id: str | None = None) -> Envelope:
        envelope = build_event(self.service, event, saga_id=saga_id,
                               metadata=metadata, parent_span_id=parent_span_id)
        self.emitted.append(envelope)
        return envelope

    def after_commit(self, callback: Callable[[], None]) -> None:
        self._after_commit.append(callback)

    async def commit(self) -> bool:
        self.commits += 1
        if not self.commit_result:
            self.emitted.clear()  # a guard that found nothing writes nothing, events included
            return False
        self.committed = True
        for callback in self._after_commit:
            callback()
        return True

    @property
    def emitted_types(self) -> list[str]:
        return [e.event_type for e in self.emitted]
