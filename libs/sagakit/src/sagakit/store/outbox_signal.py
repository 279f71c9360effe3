"""How the relay hears that outbox rows were committed (ADR 0007, ADR 0010).

PostgreSQL serialises the commits of every transaction that sent a ``NOTIFY`` in a database:
such a transaction takes one database-wide lock before its commit record and keeps it through
the WAL flush, so that notifications are queued in commit order. With every saga step
notifying, the steps of all three services committed one after another, each waiting out the
previous one's disk flush (the lock wait shows as ``Lock/object`` in ``pg_stat_activity``).

So a business commit never carries a ``NOTIFY`` while a relay of its process is connected:

- the relay here leads (holds the outbox's leadership lock): the unit of work wakes it in the
  process, after its commit;
- the relay here stands by (a replica elsewhere leads): the unit of work wakes it all the same,
  and it passes the news on to the leader with a ``NOTIFY`` of its own, in a transaction of its
  own, one at a time: the commits signalled while one is on its way share the next. No business
  commit waits for the notification lock, and a burst of commits costs a few notifications.

Only a process with no relay connected (``RUN_RELAY=false``, or its relay's connection lost)
sends the ``NOTIFY`` with its commit: the database is then the only way to the leader.

What a signal never carries is the rows: the relay selects what is pending (in id order, by
status), which is what keeps each saga's events in commit order whoever wrote them.
"""

from __future__ import annotations

from collections.abc import Callable


class OutboxSignal:
    """One per outbox in a process: shared by its relay and its units of work."""

    def __init__(self) -> None:
        self._relay: Callable[[], None] | None = None
        self._relay_leads = False

    @property
    def notify_needed(self) -> bool:
        """No relay of this process is connected: a commit must ``NOTIFY`` by itself.

        Read when the commit statement is built. A relay that loses its connection between
        then and the commit costs latency, never a row: the leader selects at least every
        ``relay_poll_interval_s``, and a relay that takes the lead selects first."""
        return self._relay is None

    @property
    def relay_leads(self) -> bool:
        return self._relay_leads

    def leading(self, wake: Callable[[], None]) -> None:
        """The relay of this process leads from now on; ``wake`` makes it select."""
        self._relay, self._relay_leads = wake, True

    def standing_by(self, forward: Callable[[], None]) -> None:
        """The relay of this process is connected and another leads; ``forward`` makes it
        wake the leader."""
        self._relay, self._relay_leads = forward, False

    def standing_down(self) -> None:
        """No relay of this process is connected."""
        self._relay, self._relay_leads = None, False

    def committed(self) -> None:
        """Outbox rows were committed in this process: the relay here, if any, selects them
        (leading) or wakes the leader (standing by)."""
        if self._relay is not None:
            self._relay()
