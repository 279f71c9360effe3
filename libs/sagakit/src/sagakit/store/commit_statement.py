"""The commit statement: a handler's staged writes, its inbox row and its outbox rows in one
statement, which the unit of work (``sagakit.store.unit_of_work``) sends at commit.

Every round trip costs more than the statement it carries on this kind of machine (a process
woken on each side: ADR 0002), so a unit of work sends as few as it can:

- The transaction begins with the first statement a handler runs on ``uow.connection``.
- The commit statement writes the staged business rows, the inbox row and the outbox rows.
  When nothing ran before it, it runs on its own, its own transaction: no BEGIN, no COMMIT.
- ``reads_outside_transaction``: a handler that takes no lock reads without a transaction
  and writes everything with the commit statement, one atomic statement; its staged write's
  *guard* checks that what it read still holds (an UPDATE's WHERE re-reads a row changed
  meanwhile) and, if not, nothing is written and ``commit`` returns False.

Statements are built once per shape and kept (``commit_statement`` is cached), so that the
driver compiles each once; their values are plain (casts in the SQL).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection

from sagakit import jsonio
from sagakit.envelope import Envelope, new_message_id


@dataclass(frozen=True)
class StagedWrite:
    """A handler's writes, run by the commit statement ahead of its inbox and outbox rows.

    ``ctes`` are (name, statement) pairs in order: INSERT, UPDATE or DELETE statements without
    a WITH of their own (RETURNING what a later part reads), values bound as ``:name`` from
    ``params``; names of parts and values starting ``uow_`` are the unit of work's. Tables are
    named ``{schema}.table``: the unit of work's schema, the service's own. ``guard``
    names the part that returns a row only if the write applied; without that row nothing is
    written, inbox and outbox rows included, and ``commit`` returns False. Statements are kept
    per shape: build ``ctes`` once, not per call."""

    ctes: tuple[tuple[str, str], ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    guard: str | None = None
    returning: str | None = None
    """The part whose rows ``commit`` hands back (``UnitOfWork.returned``)."""

    async def run(self, conn: AsyncConnection, schema: str) -> bool:
        """Runs the write by itself on ``conn``, in whatever transaction the caller holds, its
        tables in ``schema`` (for code outside a unit of work, and tests); True unless its
        guard found nothing."""
        statement = commit_statement(schema, False, False, self.ctes, self.guard,
                                      self.returning)
        return bool((await conn.execute(statement, dict(self.params))).first()[0])  # type: ignore[index]


# The inbox row of the message being handled. No ON CONFLICT: a message processed before
# fails the whole statement at the primary key, business rows and outbox rows with it.
_CLAIM_CTE = """uow_claimed AS (
    INSERT INTO {inbox} (message_id, event_type, saga_id, status)
    SELECT :uow_message_id, :uow_event_type, :uow_saga_id, :uow_inbox_status{guarded}
    RETURNING 1
)"""

# The outbox rows and the per-saga locks.
# Rows of one saga must get outbox ids in commit order, or the relay could publish a later
# event before an earlier one that committed late. A transaction-scoped advisory lock per saga
# (in a fixed order: no deadlock between two transactions) serialises them: the ids are drawn
# only after every lock is held, since no row reaches the INSERT before ``uow_locked`` has
# been computed whole (an aggregate), and the locks last until COMMIT.
_OUTBOX_LOCKS_CTE = """uow_locked AS MATERIALIZED (
    SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) AS n
    FROM unnest(CAST(:uow_lock_keys AS text[])) AS k{guarded}
)"""
# Wakes a relay in another process (sagakit.store.outbox_signal): PostgreSQL delivers the
# NOTIFY only if and when the transaction commits. Only with ``notify``: a notifying transaction
# commits under a database-wide lock (ADR 0007). A SELECT part runs only if something reads
# it, hence the INSERT's FROM.
_OUTBOX_NOTIFY_CTE = """uow_notified AS MATERIALIZED (
    SELECT pg_notify(:uow_channel, '') FROM uow_locked WHERE uow_locked.n > 0
)"""
_OUTBOX_INSERT_CTE = """uow_published AS (
    INSERT INTO {outbox} (message_id, saga_id, topic, event_type, schema_version, payload,
                          headers, traceparent, status)
    SELECT (e.r->>'message_id')::uuid, e.r->>'saga_id', e.r->>'topic', e.r->>'event_type',
           e.r->>'schema_version', e.r->'payload', e.r->'headers', e.r->>'traceparent',
           'pending'
    FROM uow_locked{notified},
         jsonb_array_elements(CAST(CAST(:uow_rows AS text) AS jsonb)) WITH ORDINALITY AS e(r, ord)
    WHERE uow_locked.n > 0
    ORDER BY e.ord
    RETURNING 1
)"""


@cache
def commit_statement(schema: str, claim: bool, outbox: bool,
                      staged: tuple[tuple[str, str], ...], guard: str | None,
                      returning: str | None = None, notify: bool = True) -> TextClause:
    """What goes to the database at commit; its first column is 1, or 0 if ``guard`` found
    nothing; with ``returning``, one row per row of that part (uow_present), or one without."""
    quoted = f'"{schema}"'
    ctes = [f"{name} AS (\n{body.replace('{schema}', quoted)}\n)" for name, body in staged]
    if claim:
        ctes.append(_CLAIM_CTE.format(inbox=f'"{schema}".processed_messages',
                                      guarded=(f" FROM (SELECT FROM {guard} LIMIT 1) AS g"
                                               if guard else "")))
    if outbox:
        ctes.append(_OUTBOX_LOCKS_CTE.format(guarded=(
            f"\n    WHERE EXISTS (SELECT 1 FROM {guard})" if guard else "")))
        if notify:
            ctes.append(_OUTBOX_NOTIFY_CTE)
        ctes.append(_OUTBOX_INSERT_CTE.format(outbox=f'"{schema}".outbox',
                                              notified=", uow_notified" if notify else ""))
    held = f"(SELECT count(*) FROM {guard})" if guard else "1"
    if returning is None:
        return text(f"WITH {', '.join(ctes)}\nSELECT {held} AS uow_held")
    return text(f"WITH {', '.join(ctes)}\nSELECT {held} AS uow_held, uow_r.*\n"
                f"FROM (SELECT 1) AS uow_one LEFT JOIN (SELECT true AS uow_present, * "
                f"FROM {returning}) AS uow_r ON true")


@dataclass(frozen=True)
class Claim:
    """The inbox row of the message a unit of work handles."""

    message_id: str
    event_type: str
    saga_id: str | None
    status: str


@dataclass
class OutgoingRow:
    """An outbox row a unit of work queued: a domain event's (``envelope``), or a raw one's."""

    envelope: Envelope | None
    topic: str
    key: str
    event_type: str
    schema_version: str
    value: dict[str, Any]
    headers: dict[str, str]
    traceparent: str | None


def commit_params(staged: StagedWrite | None, claim: Claim | None,
                  outgoing: list[OutgoingRow], schema: str,
                  notify_channel: str | None) -> dict[str, Any]:
    """The values of the commit statement ``commit_statement`` built for the same parts;
    ``notify_channel`` when it notifies."""
    params: dict[str, Any] = dict(staged.params) if staged else {}
    if claim:
        params.update(uow_message_id=claim.message_id, uow_event_type=claim.event_type,
                      uow_saga_id=claim.saga_id, uow_inbox_status=claim.status)
    if outgoing:
        if notify_channel is not None:
            params["uow_channel"] = notify_channel
        params.update({
            "uow_lock_keys": sorted({f"{schema}:{r.key}" for r in outgoing}),
            "uow_rows": jsonio.dumps([{
                "message_id": r.envelope.message_id if r.envelope else new_message_id(),
                "saga_id": r.key,
                "topic": r.topic,
                "event_type": r.event_type,
                "schema_version": r.schema_version,
                "payload": r.value,
                "headers": r.headers,
                "traceparent": r.traceparent,
            } for r in outgoing])})
    return params
