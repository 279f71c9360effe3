"""What the relay sends on its own connection: the statements, and the session they run in.

The relay's connection is asyncpg's own (it listens for notifications, and takes and renews the
lead's lease: ``sagakit.outbox.leadership``); its statements are text, formatted with the
outbox's schema and statuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sagakit.store.database import PEER_KEEPALIVE

# Marks the rows acknowledged since the last statement (message ids $1, acknowledged at $2) and
# selects the next batch ($3 rows at most), both only while the relay's epoch $4 is still the
# lease's (``fenced``, sagakit.outbox.leadership): a relay that lost the lead, and does not know
# it yet, marks nothing and gets nothing to publish. The select sees the snapshot from before
# the mark, so it leaves those rows out by message id. A row waits behind an earlier row of its
# saga that was given up on (failed).
# The statuses are written into the text, not bound: the relay's connection plans each
# statement once (generic plans, see ``RELAY_SESSION``), and only a plan that knows the status
# can use the partial indexes on pending and failed rows; with the status a parameter the
# generic plan walks the whole outbox. The fence is a one-time filter of that plan.
MARK_AND_SELECT = """
WITH marked AS (
    UPDATE {outbox} o SET status = '{published}', published_at = a.acked_at,
                          attempts = o.attempts + 1
    FROM unnest($1::uuid[], $2::timestamptz[]) AS a(message_id, acked_at)
    WHERE o.message_id = a.message_id AND {fenced}
)
SELECT o.message_id::text AS message_id, o.topic, o.saga_id, o.payload::text AS payload,
       o.headers::text AS headers, o.created_at, o.attempts, o.traceparent, o.event_type
FROM {outbox} o
WHERE {fenced} AND o.status = '{pending}' AND o.message_id <> ALL($1::uuid[]) AND NOT EXISTS (
    SELECT 1 FROM {outbox} b WHERE b.saga_id = o.saga_id AND b.status = '{failed}'
    AND b.id < o.id)
ORDER BY o.id LIMIT $3"""
# The same mark alone ($3 the epoch), when no select came within MARK_WITHIN_S.
MARK = """
UPDATE {outbox} o SET status = '{published}', published_at = a.acked_at,
                      attempts = o.attempts + 1
FROM unnest($1::uuid[], $2::timestamptz[]) AS a(message_id, acked_at)
WHERE o.message_id = a.message_id AND {fenced}"""
# A standby relay wakes the leader for the commits of its process (ADR 0010).
NOTIFY_LEADER = "SELECT pg_notify($1, '')"


# The relay's own connection. Its statements are the same few, thousands of times an hour, and
# with PostgreSQL's default (a plan per execution while the generic plan looks costlier, which
# the unknown length of the id arrays makes it) planning cost more than running them: 0.3 ms
# of PostgreSQL's CPU a batch, about a tenth of PostgreSQL's share of a saga. Every statement
# on this connection is written for a generic plan.
# Its writes may be lost without harm: a row whose published mark is lost is published again and
# the consumers' inbox drops the copy (the relay is at-least-once by design); a taking or renewal
# of the lease lost in a crash of PostgreSQL goes with every connection of that moment, the
# lease's holder's included, so no relay acts on it afterwards. So its commits do not wait for
# the WAL flush (asynchronous commit), which takes a disk flush off every relay cycle. The
# business transactions that write the outbox keep synchronous commit.
RELAY_SESSION = {"synchronous_commit": "off", "plan_cache_mode": "force_generic_plan",
                 **PEER_KEEPALIVE}


@dataclass(frozen=True)
class OutboxRow:
    """A pending row as ``MARK_AND_SELECT`` selects it."""

    message_id: str
    topic: str
    saga_id: str
    payload: dict[str, Any]
    headers: dict[str, str]
    created_at: datetime
    attempts: int
    traceparent: str | None
    event_type: str
