"""The relay's lead: a lease row with an expiry by the database's clock and a fencing epoch
(ADR 0012).

One row per outbox (``outbox_relay_lease``). A relay takes it when it has expired or when the
backend of the connection that holds it is gone (its process killed, its connection closed: no
wait for the expiry then), and the taking raises ``epoch``. The holder renews it, on its own
connection, while its loop makes progress; a holder that hangs, or whose packets stop reaching
PostgreSQL, renews nothing, and at ``expires_at`` a standby takes over.

What fences a former holder, whatever it does when it wakes:

- Kafka: it hands a record to its producer only while its lease is valid by its own clock
  (``Lease.valid``): until the monotonic time its last renewal was sent plus 95 % of the lease,
  before the expiry the database wrote (``now()`` there is at or after the send). A relay
  that wakes after the lease ran out sends nothing new, and whatever it had selected waits for
  the next leader.
- PostgreSQL: everything the relay writes to its outbox (the marks, a row's failure) carries
  its epoch and applies only while the epoch is still the lease's (``FENCED``): a woken holder
  can neither mark rows nor hold a saga's later rows behind one it calls failed.

What it cannot fence is a record its producer already held when it hung: Kafka may still get
it afterwards. That is a copy of a row the new leader publishes first if it was not yet
acknowledged (it was pending when selected, and every leader publishes a saga's pending rows in
id order), so it reaches the consumers behind that row as a duplicate, which their inbox drops.
"""

from __future__ import annotations

import time
from typing import Any, Protocol


class LeadLost(Exception):
    """This relay does not hold the lead (any more): nothing may be sent or written as its
    leader."""


# The lease's row in the outbox's schema: one outbox, one lease.
LEASE_NAME = "outbox"

# $1 holder (the relay's application name), $2 the lease in seconds. Taken when it has expired,
# when the backend that holds it is gone (pg_stat_activity lists every backend's pid, whoever
# its role), or when it was released (no pid); the first relay inserts the row.
TAKE = """
INSERT INTO {lease} AS l (name, holder, holder_pid, epoch, expires_at, taken_at)
VALUES ('{name}', $1, pg_backend_pid(), 1, now() + make_interval(secs => $2), now())
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder, holder_pid = excluded.holder_pid, epoch = l.epoch + 1,
    expires_at = excluded.expires_at, taken_at = excluded.taken_at
WHERE l.expires_at <= now()
   OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.holder_pid)
RETURNING epoch"""
# $1 epoch, $2 the lease in seconds. Renewed while the epoch is the holder's: nobody took it
# since, even if it ran out meanwhile (nothing was published by anyone else).
RENEW = """
UPDATE {lease} SET expires_at = now() + make_interval(secs => $2)
WHERE name = '{name}' AND epoch = $1
RETURNING epoch"""
# $1 epoch. Given up: free at once for the next relay that tries.
RELEASE = """
UPDATE {lease} SET expires_at = now(), holder_pid = NULL
WHERE name = '{name}' AND epoch = $1"""
# A condition for the relay's writes to its outbox, epoch bound as ``${epoch}``.
FENCED = "EXISTS (SELECT 1 FROM {lease} WHERE name = '{name}' AND epoch = ${epoch})"

# Of the lease's length: how often its holder renews it (three renewals may fail before it runs
# out), and how much of it the holder's own clock gives up for the drift between its clock and
# the database's.
RENEWALS_PER_LEASE = 4
CLOCK_MARGIN = 0.05


class Connection(Protocol):
    """What the lease needs of the relay's asyncpg connection."""

    async def fetchval(self, query: str, *args: Any) -> Any: ...

    async def execute(self, query: str, *args: Any) -> Any: ...


def statement(template: str, schema: str) -> str:
    """``template`` for the lease of the outbox in ``schema`` (``{epoch}`` left to fill)."""
    return template.format(lease=f'"{schema}".outbox_relay_lease', name=LEASE_NAME,
                           epoch="{epoch}")


class Lease:
    """This relay's hold on the lead, as far as it knows: the epoch it took, and until when
    (its monotonic clock) it may act on it."""

    def __init__(self, schema: str, holder: str, lease_s: float) -> None:
        self.holder = holder
        self.lease_s = lease_s
        self.epoch: int | None = None
        self._valid_until = 0.0
        self._take = statement(TAKE, schema)
        self._renew = statement(RENEW, schema)
        self._release = statement(RELEASE, schema)

    @property
    def renew_every_s(self) -> float:
        return self.lease_s / RENEWALS_PER_LEASE

    def valid(self) -> bool:
        """Held, and its expiry not reached by this process's clock: records may be sent."""
        return self.epoch is not None and time.monotonic() < self._valid_until

    def remaining_s(self) -> float:
        return max(0.0, self._valid_until - time.monotonic()) if self.epoch is not None else 0.0

    async def take(self, conn: Connection) -> bool:
        sent = time.monotonic()
        epoch = await conn.fetchval(self._take, self.holder, self.lease_s)
        if epoch is None:
            return False
        self._held(int(epoch), sent)
        return True

    async def renew(self, conn: Connection) -> bool:
        """False when another relay took the lead since (the epoch moved on)."""
        assert self.epoch is not None
        sent = time.monotonic()
        if await conn.fetchval(self._renew, self.epoch, self.lease_s) is None:
            self.forget()
            return False
        self._held(self.epoch, sent)
        return True

    async def release(self, conn: Connection, epoch: int) -> None:
        """Frees the lead taken as ``epoch`` for the next relay that tries (``forget`` it
        first: nothing may be sent under it from then on)."""
        await conn.execute(self._release, epoch)

    def forget(self) -> int | None:
        """The lead is lost or given up, whatever the database still says; returns the epoch
        it was held as."""
        epoch, self.epoch = self.epoch, None
        self._valid_until = 0.0
        return epoch

    def _held(self, epoch: int, sent: float) -> None:
        self.epoch = epoch
        self._valid_until = sent + self.lease_s * (1 - CLOCK_MARGIN)
