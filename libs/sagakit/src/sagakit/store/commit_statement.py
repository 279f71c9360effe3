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

A handler's writes are typed parts (``Part``: its SQL, the tables and earlier parts it names,
the values it binds), put together in a ``WriteShape`` that says which part guards the write
and which one it hands back, and staged with their values (``StagedWrite``). What the commit
statement needs of them is checked when they are built: the unit of work's own names
(``uow_``) left alone, every table given (the unit of work writes it in its schema), a value for
each bind and no other, a guard and a returning part that belong to the write. The parts stay
SQL text, not SQLAlchemy Core statements: the commit statement is one text statement whose
parts refer to each other by name, compiled once per shape, and its values stay plain.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import TableClause, TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection

from sagakit import jsonio
from sagakit.envelope import Envelope, new_message_id

RESERVED_PREFIX = "uow_"
"""Names of the commit statement's own parts and values: no staged write may take one."""

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*\Z")


def _checked_name(name: str, what: str) -> str:
    if not _IDENTIFIER.match(name):
        raise ValueError(f"{what} {name!r} is not a lower-case SQL identifier")
    if name.startswith(RESERVED_PREFIX):
        raise ValueError(f"{what} {name!r}: names starting {RESERVED_PREFIX!r} are the unit "
                         f"of work's")
    return name


class Part:
    """One statement of a staged write, a part (CTE) of the commit statement: an INSERT,
    UPDATE or DELETE (or a SELECT a later part reads) without a WITH of its own, RETURNING what
    a later part reads.

    Its SQL names each table and each earlier part it reads or writes as ``{name}`` and gives
    it after the SQL, by its own name (``Part("x", "... FROM {orders}", orders)``) or under
    the one the SQL uses (``source=inserted``): a table (SQLAlchemy's ``Table``) is written in
    the unit of work's schema, the service's own (``"schema".table``), a part by its name.
    Values are bound as ``:name``, found as SQLAlchemy's ``text()`` finds them. A name, a value
    or a ``{name}`` the part does not give fails here, when the part is built: build parts
    once, at import or per shape."""

    __slots__ = ("_hash", "_key", "binds", "name", "sql", "uses")

    def __init__(self, name: str, sql: str, /, *uses: TableClause | Part,
                 **named: TableClause | Part) -> None:
        self.name = _checked_name(name, "part")
        self.sql = sql
        given: dict[str, TableClause | Part] = {}
        for key, use in [*((u.name, u) for u in uses), *named.items()]:
            if key in given:
                raise ValueError(f"part {name!r} is given two uses named {key!r}")
            given[key] = use
        self.uses: Mapping[str, TableClause | Part] = given
        try:
            fields = {field for _, field, spec, conversion in string.Formatter().parse(sql)
                      if field is not None and not (spec or conversion)}
        except ValueError as exc:
            raise ValueError(f"part {name!r}: {exc} (a literal brace is written twice)"
                             ) from None
        if unknown := fields - given.keys():
            raise ValueError(f"part {name!r} names {sorted(unknown)} in its SQL but is given "
                             f"no table or part for it (give them after the SQL)")
        if unused := given.keys() - fields:
            raise ValueError(f"part {name!r} is given {sorted(unused)}, which its SQL does "
                             f"not name as {{name}}")
        self.binds = frozenset(text(sql).compile().params)
        for bind in self.binds:
            _checked_name(bind, f"part {name!r}: value")
        self._key = (name, sql, tuple(sorted(
            (key, ("part", u) if isinstance(u, Part) else ("table", u.name))
            for key, u in given.items())))
        self._hash = hash(self._key)

    def render(self, schema: str) -> str:
        """The part's SQL, its tables in ``schema``."""
        return self.sql.format_map({
            key: u.name if isinstance(u, Part) else f'"{schema}".{u.name}'
            for key, u in self.uses.items()})

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Part) and self._key == other._key)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Part({self.name!r})"


class WriteShape:
    """The parts of a staged write, in order, and which of them is its ``guard`` and which it
    hands back (``returning``): what the commit statement is built from, once per shape (and
    schema). ``guard`` returns a row only if the write applied; without that row nothing is
    written, inbox and outbox rows included, and ``commit`` returns False. ``returning``'s rows
    are what ``commit`` hands back (``UnitOfWork.returned``). Every part a part uses is an
    earlier one of the same shape, and ``guard`` and ``returning`` are parts of it: checked
    here. Shapes are equal when their parts are: build them once, not per call."""

    __slots__ = ("_hash", "_key", "binds", "guard", "parts", "returning")

    def __init__(self, *parts: Part, guard: Part | None = None,
                 returning: Part | None = None) -> None:
        if not parts:
            raise ValueError("a staged write has at least one part")
        seen: list[Part] = []
        for part in parts:
            if any(p.name == part.name for p in seen):
                raise ValueError(f"two parts named {part.name!r}")
            for used in part.uses.values():
                if isinstance(used, Part) and used not in seen:
                    raise ValueError(f"part {part.name!r} uses part {used.name!r}, which is not "
                                     f"an earlier part of this write")
            seen.append(part)
        for role, named in (("guard", guard), ("returning", returning)):
            if named is not None and named not in parts:
                raise ValueError(f"{role} {named!r} is not a part of this write "
                                 f"({', '.join(p.name for p in parts)})")
        self.parts = parts
        self.guard = guard
        self.returning = returning
        self.binds: frozenset[str] = frozenset().union(*(p.binds for p in parts))
        """The names of the values the write binds: a ``StagedWrite`` gives exactly these."""
        self._key = (parts, guard.name if guard else None,
                     returning.name if returning else None)
        self._hash = hash(self._key)

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, WriteShape) and self._key == other._key)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"WriteShape({', '.join(p.name for p in self.parts)})"


@dataclass(frozen=True)
class StagedWrite:
    """A handler's writes, run by the commit statement ahead of its inbox and outbox rows:
    a ``shape`` built once and the values of this call, one for each value the shape binds
    and no other (checked here)."""

    shape: WriteShape
    params: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.params.keys() != self.shape.binds:
            missing = sorted(self.shape.binds - self.params.keys())
            unknown = sorted(self.params.keys() - self.shape.binds)
            raise ValueError(f"{self.shape!r}: "
                             + "; ".join(([f"no value for {missing}"] if missing else [])
                                         + ([f"values no part binds: {unknown}"]
                                            if unknown else [])))

    async def run(self, conn: AsyncConnection, schema: str) -> bool:
        """Runs the write by itself on ``conn``, in whatever transaction the caller holds, its
        tables in ``schema`` (for code outside a unit of work, and tests); True unless its
        guard found nothing."""
        statement = commit_statement(schema, False, False, self.shape, False)
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
def commit_statement(schema: str, claim: bool, outbox: bool, staged: WriteShape | None,
                     notify: bool = True) -> TextClause:
    """What goes to the database at commit; its first column is 1, or 0 if the staged write's
    guard found nothing; with a ``returning`` part, one row per row of that part (uow_present),
    or one without."""
    parts = staged.parts if staged else ()
    guard = staged.guard.name if staged and staged.guard else None
    returning = staged.returning.name if staged and staged.returning else None
    ctes = [f"{part.name} AS (\n{part.render(schema)}\n)" for part in parts]
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
