"""What a use case may ask of its unit of work: queue events, run code after the commit, commit.

Use cases depend on this ``Protocol`` (and on their service's own repository protocols), not on
``sagakit.store.unit_of_work.UnitOfWork``: the real one writes everything with one commit
statement, ``sagakit.fakes.FakeUnitOfWork`` keeps it in memory so a use case can be unit-tested
without a database. How the writes reach PostgreSQL (staged with the commit statement, or run before it)
is the repository adapter's business, never the use case's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from saga_contracts.events.base import Event
from sagakit.envelope import Envelope


class UnitOfWorkPort(Protocol):
    def emit(self, event: Event, *, saga_id: str | None = None,
             metadata: dict[str, Any] | None = None,
             parent_span_id: str | None = None) -> Envelope:
        """Queues a domain event for the outbox, written when the unit of work commits; saga id
        and parent span default to those of the message being handled."""
        ...

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Runs ``callback`` once the transaction has committed (never if it rolls back)."""
        ...

    async def commit(self) -> bool:
        """Writes what the unit of work holds and commits; False when a guarded write found
        that what it was decided on no longer holds (then nothing was written)."""
        ...
