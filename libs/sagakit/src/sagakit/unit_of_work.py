"""The one commit point of a handler: business rows, the inbox row and the outbox rows together.

    async with uow_factory() as uow:
        uow.claim(message_id, event_type, saga_id)  # the inbox row, written at commit
        ...reads (and writes) on uow.connection...
        uow.stage(write)                          # writes that ride on the commit statement
        uow.emit("StockVerificado", payload)      # validated, enveloped, queued
        await uow.commit()                        # one statement, then COMMIT if one is open

Every round trip costs more than the statement it carries on this kind of machine (a process
woken on each side: ADR 0002), so a unit of work sends as few as it can:

- The transaction begins with the first statement a handler runs on ``uow.connection``.
- The commit statement writes the staged business rows, the inbox row and the outbox rows.
  When nothing ran before it, it runs on its own, its own transaction: no BEGIN, no COMMIT.
- ``reads_outside_transaction``: a handler that takes no lock reads without a transaction
  and writes everything with the commit statement, one atomic statement; its staged write's
  *guard* checks that what it read still holds (an UPDATE's WHERE re-reads a row changed
  meanwhile) and, if not, nothing is written and ``commit`` returns False.

``commit`` raises ``AlreadyProcessed`` (and writes nothing) when the message was processed
before: the inbox row's primary key refuses it, and the whole statement with it. A duplicate
delivered while the first is still in flight waits at that key for the first to commit.

Nothing else commits and nothing publishes to Kafka: the relay does, from the outbox. It hears
of the commit from the unit of work's ``OutboxSignal``: in the process when it runs here and
leads, else by a ``NOTIFY`` sent with the commit statement (sagakit.outbox_signal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import TracebackType
from typing import Any

import asyncpg
from saga_contracts import registry
from sqlalchemy import TextClause, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sagakit import jsonio, tracing
from sagakit.context import current_message
from sagakit.database import CONNECTION_LOST
from sagakit.driver import Row, driver_of
from sagakit.driver import compiled as driver_form
from sagakit.envelope import Envelope, new_message_id
from sagakit.errors import CommitOutcomeUnknown, is_connection_failure, violated_unique_key_of
from sagakit.outbox_signal import OutboxSignal
from sagakit.tables import INBOX_PROCESSED, MessagingTables


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
        statement = _commit_statement(schema, False, False, self.ctes, self.guard,
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
# Wakes a relay in another process (sagakit.outbox_signal): PostgreSQL delivers the NOTIFY
# only if and when the transaction commits. Only with ``notify``: a notifying transaction
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
def _commit_statement(schema: str, claim: bool, outbox: bool,
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


def build_event(service: str, event_type: str, payload: dict[str, Any], *,
                saga_id: str | None = None, metadata: dict[str, Any] | None = None,
                parent_span_id: str | None = None) -> Envelope:
    """The envelope of an event ``service`` emits, its payload checked against the latest
    schema of ``event_type``. Saga id, parent span and the correlation metadata come from the
    message being handled (Part I §7.1); work that runs outside a handler (a timer, a retry)
    names the saga and its parent span itself."""
    cause = current_message.get()
    if saga_id is None:
        if cause is None:
            raise ValueError("saga_id is required outside a message handler")
        saga_id = cause.saga_id
    schema = registry.latest(event_type)
    registry.validate(event_type, schema.version, payload)
    meta = dict(metadata or {})
    if cause is not None:
        meta.setdefault("causation_id", cause.message_id)
        for k in ("correlation_id", "user_id", "channel"):
            if k in cause.metadata:
                meta.setdefault(k, cause.metadata[k])
    return Envelope.new(saga_id=saga_id, event_type=event_type, schema_version=schema.version,
                        source_service=service, payload=payload,
                        parent_span_id=cause.span_id if cause else parent_span_id,
                        metadata=meta)


class AlreadyProcessed(Exception):
    """The message of this unit of work was processed before: nothing was written."""


@dataclass(frozen=True)
class _Claim:
    message_id: str
    event_type: str
    saga_id: str | None
    status: str


@dataclass
class _OutgoingRow:
    envelope: Envelope | None
    topic: str
    key: str
    event_type: str
    schema_version: str
    value: dict[str, Any]
    headers: dict[str, str]
    traceparent: str | None


class UnitOfWork:
    def __init__(self, engine: AsyncEngine, tables: MessagingTables, service: str,
                 traceparent: Callable[[], str | None] | None = None,
                 isolation_level: str | None = None,
                 reads_outside_transaction: bool = False,
                 within: SharedTransaction | None = None,
                 signal: OutboxSignal | None = None) -> None:
        if within is not None and (isolation_level or not reads_outside_transaction):
            raise ValueError("only a handler that reads outside a transaction and writes with "
                             "its commit statement alone may share a transaction")
        self._engine = engine
        self._within = within
        # Without a signal, every commit with outbox rows notifies (any relay anywhere hears).
        self._signal = signal
        self._isolation_level = isolation_level
        self._reads_outside_transaction = reads_outside_transaction
        self._after_commit: list[Callable[[], None]] = []
        self.tables = tables
        self.service = service
        self._traceparent = traceparent or tracing.current_traceparent
        self._conn: AsyncConnection | None = None
        self._outgoing: list[_OutgoingRow] = []
        self._claim: _Claim | None = None
        self._staged: StagedWrite | None = None
        self.returned: list[Row] = []
        """The rows of the staged write's ``returning`` part, once committed, by column."""
        self.committed = False
        self.ended = False
        """Committed, or given up by ``commit`` itself (a guard that found nothing)."""

    @property
    def connection(self) -> AsyncConnection:
        if self._conn is None:
            raise RuntimeError("unit of work used outside 'async with'")
        return self._conn

    async def __aenter__(self) -> UnitOfWork:
        if self._within is not None:
            self._conn = self._within.connection
            return self
        self._conn = await self._engine.connect()
        # No BEGIN here: SQLAlchemy begins the transaction with the first statement (asyncpg
        # sends the isolation level with that BEGIN), and a unit of work whose only statement
        # is its commit statement needs none. The pool puts the default level back.
        if self._reads_outside_transaction:
            await self._conn.execution_options(isolation_level="AUTOCOMMIT")
        elif self._isolation_level:
            await self._conn.execution_options(isolation_level=self._isolation_level)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._conn is not None
        if self._within is not None:
            self._conn = None  # the shared transaction ends it, and returns the connection
            return
        try:
            if not self.ended and self._conn.in_transaction():
                await self._conn.rollback()  # no round trip when nothing began
        finally:
            try:
                await self._conn.close()
            except Exception:
                if exc is None:
                    raise
                # Closing a dead connection must not hide why the unit of work failed.
            finally:
                self._conn = None

    # ---------------------------------------------------------------- inbox

    def claim(self, message_id: str, event_type: str, saga_id: str | None,
              status: str = INBOX_PROCESSED) -> None:
        """Records the message as processed by this service, when the unit of work commits;
        ``commit`` raises ``AlreadyProcessed`` if it was processed before (the primary key is
        the arbiter, also between two deliveries in flight at once)."""
        self._claim = _Claim(message_id, event_type, saga_id, status)

    async def was_processed(self, message_id: str) -> bool:
        t = self.tables.processed_messages
        return (await self.connection.execute(
            select(t.c.message_id).where(t.c.message_id == message_id))).first() is not None

    # ---------------------------------------------------------------- outbox

    def emit(self, event_type: str, payload: dict[str, Any], *, saga_id: str | None = None,
             metadata: dict[str, Any] | None = None,
             parent_span_id: str | None = None) -> Envelope:
        """Queues a domain event for the outbox; it is written when the unit of work commits.

        Saga id and parent span default to those of the message being handled (Part I §7.1);
        work that runs outside a handler (a timer, a retry) names its parent span itself.
        """
        envelope = build_event(self.service, event_type, payload, saga_id=saga_id,
                               metadata=metadata, parent_span_id=parent_span_id)
        schema_topic = registry.latest(event_type).topic
        tp = self._traceparent()
        self._outgoing.append(_OutgoingRow(envelope, schema_topic, envelope.saga_id, event_type,
                                           envelope.schema_version, envelope.to_dict(),
                                           envelope.kafka_headers(tp), tp))
        return envelope

    def emit_raw(self, *, topic: str, key: str, event_type: str, value: dict[str, Any],
                 headers: dict[str, str]) -> None:
        """Queues a message that is not a domain event (a dead letter) for the outbox."""
        self._outgoing.append(_OutgoingRow(None, topic, key, event_type, "-", value, headers,
                                           None))

    @property
    def emitted(self) -> list[Envelope]:
        return [r.envelope for r in self._outgoing if r.envelope is not None]

    # ---------------------------------------------------------------- writes

    def stage(self, write: StagedWrite) -> None:
        """Writes ``write`` with the commit statement (one staged write per unit of work)."""
        if self._staged is not None:
            raise RuntimeError("a unit of work stages one write; make it several CTEs")
        self._staged = write

    async def commit(self) -> bool:
        """Writes what was staged, claimed and emitted, and commits. False if the staged
        write's guard found nothing: then nothing was written and the unit of work is over."""
        with tracing.span(
                "db commit", attributes={"db.system": "postgresql",
                                         "saga.outbox_rows": len(self._outgoing)}):
            return await self._commit()

    async def _commit(self) -> bool:
        conn = self.connection
        if self.ended:
            raise RuntimeError("unit of work already ended")
        # The commit statement is a transaction of its own when nothing began one before it,
        # and never in a shared transaction (which commits it with the others).
        shared = self._within is not None
        alone = not shared and (self._reads_outside_transaction or not conn.in_transaction())
        if self._claim or self._outgoing or self._staged:
            driver = await self._driver(alone)
            # Sent on the driver's connection, in the transaction SQLAlchemy began if there is
            # one: it is the statement every saga step sends, and SQLAlchemy's execution layer
            # (greenlet, cursor adapter, result) cost more CPU than asyncpg's whole round trip
            # (ADR 0003). Its values are plain (casts in the SQL): nothing for
            # SQLAlchemy's type processing to do.
            statement = driver_form(self._statement())
            try:
                rows = await driver.fetch(statement.sql, *statement.args(self._params()))
            except (asyncpg.PostgresError, *CONNECTION_LOST) as exc:
                if self._claim and violated_unique_key_of(exc) == "processed_messages":
                    await self._give_up(alone)
                    raise AlreadyProcessed(self._claim.message_id) from None
                if is_connection_failure(exc) and not shared:
                    self.ended = True  # nothing to roll back on a dead connection
                    await conn.invalidate()
                    if alone:  # that statement was its own COMMIT
                        raise CommitOutcomeUnknown(
                            f"connection lost during commit: {exc!r}") from exc
                raise
            held = rows[0]["uow_held"]
            if self._staged and self._staged.returning:
                self.returned = [r for r in rows if r["uow_present"]]
            if not held:
                await self._give_up(alone)
                return False
        if not alone and not shared:
            try:
                await conn.commit()
            except Exception as exc:
                if is_connection_failure(exc):
                    self.ended = True  # nothing left to roll back on a dead connection
                    raise CommitOutcomeUnknown(f"connection lost during COMMIT: {exc!r}") from exc
                raise
        self.committed = self.ended = True
        if self._outgoing and self._signal is not None:
            self._after_commit.append(self._signal.committed)
        if self._within is not None:
            # Written, not yet committed: what waits for the commit waits for the shared one.
            self._within.after_commit(*self._after_commit)
            return True
        for callback in self._after_commit:
            callback()
        return True

    async def _driver(self, alone: bool) -> asyncpg.Connection:
        driver = await driver_of(self.connection)
        if alone:
            await self._known_alive(driver)
        return driver

    async def _known_alive(self, driver: asyncpg.Connection) -> None:
        """A statement that is its own COMMIT and dies with its connection leaves its outcome
        unknown, but one never sent did nothing: a connection already seen closed (the
        database went away while it sat in the pool) is refused before anything is sent."""
        if driver.is_closed():
            await self.connection.invalidate()
            self.ended = True
            raise ConnectionResetError("database connection closed; the commit statement was "
                                       "not sent")

    async def _give_up(self, alone: bool) -> None:
        if not alone and self._within is None:
            await self.connection.rollback()
        self.ended = True

    def _statement(self) -> TextClause:
        staged = self._staged
        return _commit_statement(self.tables.schema, self._claim is not None,
                                 bool(self._outgoing), staged.ctes if staged else (),
                                 staged.guard if staged else None,
                                 staged.returning if staged else None, self._notifies())

    def _notifies(self) -> bool:
        return bool(self._outgoing) and (self._signal is None or self._signal.notify_needed)

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = dict(self._staged.params) if self._staged else {}
        if self._claim:
            params.update(uow_message_id=self._claim.message_id,
                          uow_event_type=self._claim.event_type,
                          uow_saga_id=self._claim.saga_id, uow_inbox_status=self._claim.status)
        if self._outgoing:
            params.update(self._outbox_params())
        return params

    def _outbox_params(self) -> dict[str, Any]:
        params = {"uow_channel": self.tables.notify_channel} if self._notifies() else {}
        return {
            **params,
            "uow_lock_keys": sorted({f"{self.tables.schema}:{r.key}" for r in self._outgoing}),
            "uow_rows": jsonio.dumps([{
                "message_id": r.envelope.message_id if r.envelope else new_message_id(),
                "saga_id": r.key,
                "topic": r.topic,
                "event_type": r.event_type,
                "schema_version": r.schema_version,
                "payload": r.value,
                "headers": r.headers,
                "traceparent": r.traceparent,
            } for r in self._outgoing])}

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Runs ``callback`` once the transaction has committed (never if it rolls back)."""
        self._after_commit.append(callback)


class SharedTransaction:
    """Units of work of several messages in one transaction: one COMMIT for all of them.

        async with shared:                     # a connection, BEGIN
            async with shared.unit() as uow:   # a unit of work whose commit statement runs
                ...                            # in the shared transaction
            await shared.commit()              # COMMIT; then every unit's after_commit

    For the consumer, when a partition's records queue up faster than they are handled: a
    commit costs PostgreSQL more than the statement it ends (a WAL flush, and a wake-up of
    every connection listening for the notifications it sends), and one COMMIT for many
    records divides that cost (ADR 0006).

    Only units that read outside a transaction and write everything with their commit
    statement may share one (``UnitOfWork`` refuses others): each unit's writes are then that
    one statement, whole or nothing, and a unit whose guard found nothing wrote nothing and
    leaves the transaction usable. A unit that fails (a duplicate's claim included) leaves it
    aborted: nothing of any unit is written, and the caller handles the messages again one by
    one. A unit's ``committed`` means written in the shared transaction; what it asked to run
    after its commit runs after the shared COMMIT, and never if the transaction rolls back.

    Locks taken by one unit are held until the shared COMMIT, so two shared transactions can
    wait for each other: a lock wait longer than ``lock_timeout_ms`` fails the transaction
    (SQLSTATE 55P03) rather than leaving a deadlock to PostgreSQL's detector (a second).
    """

    def __init__(self, engine: AsyncEngine, tables: MessagingTables, service: str,
                 lock_timeout_ms: int, signal: OutboxSignal | None = None) -> None:
        self._engine = engine
        self._signal = signal
        self.tables = tables
        self.service = service
        self._lock_timeout_ms = int(lock_timeout_ms)
        self._conn: AsyncConnection | None = None
        self._driver: asyncpg.Connection | None = None
        self._callbacks: list[Callable[[], None]] = []
        self.committed = False

    @property
    def connection(self) -> AsyncConnection:
        if self._conn is None:
            raise RuntimeError("shared transaction used outside 'async with'")
        return self._conn

    async def __aenter__(self) -> SharedTransaction:
        conn = await self._engine.connect()
        try:
            # SQLAlchemy in autocommit sends no BEGIN or COMMIT of its own, and the units' reads
            # go to the driver (sagakit.driver): the transaction is the driver's, begun here.
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            driver = await driver_of(conn)
            await driver.execute(
                f"BEGIN; SET LOCAL lock_timeout = '{self._lock_timeout_ms}ms'")
        except BaseException:
            await conn.invalidate()
            await conn.close()
            raise
        self._conn, self._driver = conn, driver
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        conn, driver = self._conn, self._driver
        assert conn is not None and driver is not None
        self._conn = self._driver = None
        try:
            if not self.committed:
                try:
                    await driver.execute("ROLLBACK")
                except BaseException:
                    # Whatever state the connection is in, it must not go back to the pool.
                    await conn.invalidate()
        finally:
            await conn.close()

    def unit(self) -> UnitOfWork:
        return UnitOfWork(self._engine, self.tables, self.service,
                          reads_outside_transaction=True, within=self, signal=self._signal)

    def after_commit(self, *callbacks: Callable[[], None]) -> None:
        self._callbacks.extend(callbacks)

    async def commit(self) -> None:
        if self._driver is None or self.committed:
            raise RuntimeError("shared transaction not open")
        try:
            await self._driver.execute("COMMIT")
        except BaseException as exc:
            if is_connection_failure(exc):
                raise CommitOutcomeUnknown(f"connection lost during COMMIT: {exc!r}") from exc
            raise
        self.committed = True
        for callback in self._callbacks:
            callback()


UnitOfWorkFactory = Callable[..., UnitOfWork]
