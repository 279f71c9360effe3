"""How the relay hears that outbox rows were committed (ADR 0007).

PostgreSQL serialises the commits of every transaction that sent a ``NOTIFY`` in a database:
such a transaction takes one database-wide lock before its commit record and keeps it through
the WAL flush, so that notifications are queued in commit order. With every saga step
notifying, the steps of all three services committed one after another, each waiting out the
previous one's disk flush (the lock wait shows as ``Lock/object`` in ``pg_stat_activity``).

So a commit tells the relay through the database only when it must. The relay that publishes
a service's outbox (the one holding its leadership lock) most often runs in the process that
wrote the rows; then the unit of work wakes it in the process, after its commit, and sends no
``NOTIFY``. A process whose own relay does not lead (it stands by, or does not run) still
notifies: the leader is elsewhere and only the database can reach it.

What a signal never carries is the rows: the relay selects what is pending (in id order, by
status), which is what keeps each saga's events in commit order whoever wrote them.
"""

from __future__ import annotations

from collections.abc import Callable


class OutboxSignal:
    """One per outbox in a process: shared by its relay and its units of work."""

    def __init__(self) -> None:
        self._wake_leader: Callable[[], None] | None = None

    @property
    def notify_needed(self) -> bool:
        """No relay of this process leads: a commit must ``NOTIFY`` for the leader elsewhere.

        Read when the commit statement is built. Leadership that moves between then and the
        commit costs latency, never a row: a relay that takes the lead selects first, and the
        rows of a commit that neither notified nor woke anyone wait for the new leader's
        periodic select (``relay_poll_interval_s``)."""
        return self._wake_leader is None

    def leading(self, wake: Callable[[], None]) -> None:
        """The relay of this process leads from now on; ``wake`` makes it select."""
        self._wake_leader = wake

    def standing_down(self) -> None:
        self._wake_leader = None

    def committed(self) -> None:
        """Outbox rows were committed in this process: the leading relay here, if any, looks
        for them now."""
        if self._wake_leader is not None:
            self._wake_leader()
