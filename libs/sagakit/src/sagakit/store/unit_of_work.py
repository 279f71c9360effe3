"""The one commit point of a handler: business rows, the inbox row and the outbox rows together.

    async with uow_factory() as uow:
        uow.claim(message_id, event_type, saga_id)  # the inbox row, written at commit
        ...reads (and writes) on uow.connection...
        uow.stage(write)                          # writes that ride on the commit statement
        uow.emit(StockVerificado(...))            # written, validated, enveloped, queued
        await uow.commit()                        # one statement, then COMMIT if one is open

How few round trips that takes, and the ``reads_outside_transaction`` mode in which a handler
reads without a transaction and writes with one guarded statement, is the commit statement's
story (``sagakit.store.commit_statement``, ADR 0002).

``commit`` raises ``AlreadyProcessed`` (and writes nothing) when the message was processed
before: the inbox row's primary key refuses it, and the whole statement with it. A duplicate
delivered while the first is still in flight waits at that key for the first to commit.

Nothing else commits and nothing publishes to Kafka: the relay does, from the outbox. It hears
of the commit from the unit of work's ``OutboxSignal``: in the process when a relay is connected
here (it selects, or wakes the leader elsewhere), else by a ``NOTIFY`` sent with the commit
statement (``sagakit.store.outbox_signal``).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

import asyncpg
from sqlalchemy import TextClause, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from saga_contracts import registry
from saga_contracts.events.base import Event
from sagakit.envelope import Envelope
from sagakit.errors import (
    CONNECTION_LOST,
    CommitOutcomeUnknown,
    is_connection_failure,
    violated_unique_key_of,
)
from sagakit.event_builder import build_event
from sagakit.observability import tracing
from sagakit.store.commit_statement import (
    Claim,
    OutgoingRow,
    StagedWrite,
    commit_params,
    commit_statement,
)
from sagakit.store.driver import Row, driver_of
from sagakit.store.driver import compiled as driver_form
from sagakit.store.outbox_signal import OutboxSignal
from sagakit.store.tables import INBOX_PROCESSED, MessagingTables


class EnclosingTransaction(Protocol):
    """A transaction a unit of work runs in instead of its own (``SharedTransaction``): its
    connection, and what to run once it commits."""

    @property
    def connection(self) -> AsyncConnection: ...

    def after_commit(self, *callbacks: Callable[[], None]) -> None: ...


class AlreadyProcessed(Exception):
    """The message of this unit of work was processed before: nothing was written."""


class UnitOfWork:
    def __init__(self, engine: AsyncEngine, tables: MessagingTables, service: str,
                 traceparent: Callable[[], str | None] | None = None,
                 isolation_level: str | None = None,
                 reads_outside_transaction: bool = False,
                 within: EnclosingTransaction | None = None,
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
        self._outgoing: list[OutgoingRow] = []
        self._claim: Claim | None = None
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
        self._claim = Claim(message_id, event_type, saga_id, status)

    async def was_processed(self, message_id: str) -> bool:
        return await self.inbox_status(message_id) is not None

    async def inbox_status(self, message_id: str) -> str | None:
        """How the inbox holds ``message_id``: processed, dead-lettered, or None (not at all)."""
        t = self.tables.processed_messages
        row = (await self.connection.execute(
            select(t.c.status).where(t.c.message_id == message_id))).first()
        return None if row is None else str(row.status)

    # ---------------------------------------------------------------- outbox

    def emit(self, event: Event, *, saga_id: str | None = None,
             metadata: dict[str, Any] | None = None,
             parent_span_id: str | None = None) -> Envelope:
        """Queues ``event`` (its type is its model's) for the outbox; it is written when the
        unit of work commits.

        Saga id and parent span default to those of the message being handled
        (docs/standard.md#saga-and-span-ids); work that runs outside a handler (a timer, a retry)
        names its parent span itself.
        """
        envelope = build_event(self.service, event, saga_id=saga_id,
                               metadata=metadata, parent_span_id=parent_span_id)
        schema_topic = registry.latest(envelope.event_type).topic
        tp = self._traceparent()
        # The trace's vendor state goes with it, in the row's headers (the relay reads it).
        ts = tracing.current_tracestate() if tp else None
        self._outgoing.append(OutgoingRow(envelope, schema_topic, envelope.saga_id,
                                           envelope.event_type,
                                           envelope.schema_version, envelope.to_dict(),
                                           envelope.kafka_headers(tp, ts), tp))
        return envelope

    def emit_raw(self, *, topic: str, key: str, event_type: str, value: dict[str, Any],
                 headers: dict[str, str]) -> None:
        """Queues a message that is not a domain event (a dead letter) for the outbox."""
        self._outgoing.append(OutgoingRow(None, topic, key, event_type, "-", value, headers,
                                           None))

    @property
    def emitted(self) -> list[Envelope]:
        return [r.envelope for r in self._outgoing if r.envelope is not None]

    # ---------------------------------------------------------------- writes

    def stage(self, write: StagedWrite) -> None:
        """Writes ``write`` with the commit statement (one staged write per unit of work)."""
        if self._staged is not None:
            raise RuntimeError("a unit of work stages one write; make it several parts")
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
            if self._staged and self._staged.shape.returning:
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
        return commit_statement(self.tables.schema, self._claim is not None,
                                bool(self._outgoing),
                                self._staged.shape if self._staged else None, self._notifies())

    def _notifies(self) -> bool:
        return bool(self._outgoing) and (self._signal is None or self._signal.notify_needed)

    def _params(self) -> dict[str, Any]:
        return commit_params(self._staged, self._claim, self._outgoing, self.tables.schema,
                             self.tables.notify_channel if self._notifies() else None)

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Runs ``callback`` once the transaction has committed (never if it rolls back)."""
        self._after_commit.append(callback)


UnitOfWorkFactory = Callable[..., UnitOfWork]
