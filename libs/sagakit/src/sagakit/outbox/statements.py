"""What the relay sends on its own connection: the statements, and the session they run in.

The relay's connection is asyncpg's own (it listens for notifications and holds the leadership
lock); its statements are text, formatted with the outbox's schema and statuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Marks the rows acknowledged since the last statement (message ids $1, acknowledged at $2) and
# selects the next batch. The select sees the snapshot from before the mark, so it leaves those
# rows out by message id. A row waits behind an earlier row of its saga that was given up on
# (failed).
# The statuses are written into the text, not bound: the relay's connection plans each
# statement once (generic plans, see ``RELAY_SESSION``), and only a plan that knows the status
# can use the partial indexes on pending and failed rows; with the status a parameter the
# generic plan walks the whole outbox.
MARK_AND_SELECT = """
WITH marked AS (
    UPDATE {outbox} o SET status = '{published}', published_at = a.acked_at,
                          attempts = o.attempts + 1
    FROM unnest($1::uuid[], $2::timestamptz[]) AS a(message_id, acked_at)
    WHERE o.message_id = a.message_id
)
SELECT o.message_id::text AS message_id, o.topic, o.saga_id, o.payload::text AS payload,
       o.headers::text AS headers, o.created_at, o.attempts, o.traceparent, o.event_type
FROM {outbox} o
WHERE o.status = '{pending}' AND o.message_id <> ALL($1::uuid[]) AND NOT EXISTS (
    SELECT 1 FROM {outbox} b WHERE b.saga_id = o.saga_id AND b.status = '{failed}'
    AND b.id < o.id)
ORDER BY o.id LIMIT $3"""
# The same mark alone, when no select came within MARK_WITHIN_S.
MARK = """
UPDATE {outbox} o SET status = '{published}', published_at = a.acked_at,
                      attempts = o.attempts + 1
FROM unnest($1::uuid[], $2::timestamptz[]) AS a(message_id, acked_at)
WHERE o.message_id = a.message_id"""
# A standby relay wakes the leader for the commits of its process (ADR 0010).
NOTIFY_LEADER = "SELECT pg_notify($1, '')"


def leadership_key(schema: str) -> str:
    """The text whose ``hashtextextended(key, 0)`` is the advisory lock of the outbox's leader."""
    return f"outbox-relay:{schema}"


# Which connection holds each outbox's leadership lock, by its application name
# (``<service>-relay@<instance>``); $1 is the leadership keys. A bigint advisory lock shows in
# pg_locks as two 32-bit halves (classid high, objid low) with objsubid 1.
RELAY_LEADERS = """
SELECT k.key, a.application_name, a.pid
FROM unnest($1::text[]) AS k(key)
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
    AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(k.key, 0)
JOIN pg_stat_activity a ON a.pid = l.pid
ORDER BY k.key"""

# The relay's own connection. Its statements are the same few, thousands of times an hour, and
# with PostgreSQL's default (a plan per execution while the generic plan looks costlier, which
# the unknown length of the id arrays makes it) planning cost more than running them: 0.3 ms
# of PostgreSQL's CPU a batch, about a tenth of PostgreSQL's share of a saga. Every statement
# on this connection is written for a generic plan.
# Marking a row published is the only write on this connection, and it may be lost without
# harm: a row left pending is published again and the consumers' inbox drops the copy (the
# relay is at-least-once by design). So its commit does not wait for the WAL flush
# (asynchronous commit), which takes a disk flush off every relay cycle. The business
# transactions that write the outbox keep synchronous commit.
RELAY_SESSION = {"synchronous_commit": "off", "plan_cache_mode": "force_generic_plan"}


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
