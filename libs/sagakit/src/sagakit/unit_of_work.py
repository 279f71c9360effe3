"""The one commit point of a handler: business rows, the inbox row and the outbox rows together.

    async with uow_factory() as uow:
        uow.claim(message_id, event_type, saga_id)  # the inbox row, written at commit
        ...business changes on uow.connection...
        uow.emit("StockVerificado", payload)      # validated, enveloped, queued
        await uow.commit()                        # one transaction, then NOTIFY the relay

``commit`` raises ``AlreadyProcessed`` (and writes nothing) when the message was processed
before: the inbox row goes in with the outbox rows, in the statement before COMMIT, so a
handler costs one round trip less than with a claim of its own at the start. A duplicate
delivered while the first is still in flight runs the handler on what it can see, then waits
at the inbox row's primary key for the first to commit, finds it and rolls back.

Nothing else commits and nothing publishes to Kafka: the relay does, from the outbox.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from saga_contracts import registry
from sqlalchemy import TextClause, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sagakit import tracing
from sagakit.context import current_message
from sagakit.envelope import Envelope
from sagakit.errors import CommitOutcomeUnknown, is_connection_failure
from sagakit.tables import INBOX_PROCESSED, MessagingTables

# The outbox rows, the per-saga locks and the relay's wake-up, in one round trip.
# Rows of one saga must get outbox ids in commit order, or the relay could publish a later
# event before an earlier one that committed late. A transaction-scoped advisory lock per saga
# (in a fixed order: no deadlock between two transactions) serialises them: the ids are drawn
# only after every lock is held, since no row reaches the INSERT before the ``locked`` CTE has
# been computed whole (an aggregate), and the locks last until COMMIT. PostgreSQL delivers the
# NOTIFY only if and when the transaction commits.
_OUTBOX_CTES = """
locked AS MATERIALIZED (
    SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) AS n
    FROM unnest(CAST(:lock_keys AS text[])) AS k
), notified AS MATERIALIZED (
    SELECT pg_notify(:channel, '') FROM locked
), published AS (
    INSERT INTO {outbox} (message_id, saga_id, topic, event_type, schema_version, payload,
                          headers, traceparent, status)
    SELECT (e.r->>'message_id')::uuid, e.r->>'saga_id', e.r->>'topic', e.r->>'event_type',
           e.r->>'schema_version', e.r->'payload', e.r->'headers', e.r->>'traceparent',
           'pending'
    FROM locked, notified,
         jsonb_array_elements(CAST(:rows AS jsonb)) WITH ORDINALITY AS e(r, ord)
    WHERE locked.n > 0
    ORDER BY e.ord
    RETURNING 1
)"""

# The inbox row of the message being handled; no row back means it was processed before.
_CLAIM_CTE = """
claimed AS (
    INSERT INTO {inbox} (message_id, event_type, saga_id, status)
    VALUES (:message_id, :event_type, :saga_id, :inbox_status)
    ON CONFLICT (message_id) DO NOTHING
    RETURNING 1
)"""


@functools.cache
def _commit_statement(schema: str, claim: bool, outbox: bool) -> TextClause:
    """What goes to the database just before COMMIT; returns 1 if the claim (if any) held."""
    ctes = []
    if claim:
        ctes.append(_CLAIM_CTE.format(inbox=f'"{schema}".processed_messages'))
    if outbox:
        ctes.append(_OUTBOX_CTES.format(outbox=f'"{schema}".outbox'))
    held = "(SELECT count(*) FROM claimed)" if claim else "1"
    return text(f"WITH {','.join(ctes)}\nSELECT {held}")


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
                 isolation_level: str | None = None) -> None:
        self._engine = engine
        self._isolation_level = isolation_level
        self._after_commit: list[Callable[[], None]] = []
        self.tables = tables
        self.service = service
        self._traceparent = traceparent or tracing.current_traceparent
        self._conn: AsyncConnection | None = None
        self._outgoing: list[_OutgoingRow] = []
        self._claim: _Claim | None = None
        self.committed = False

    @property
    def connection(self) -> AsyncConnection:
        if self._conn is None:
            raise RuntimeError("unit of work used outside 'async with'")
        return self._conn

    async def __aenter__(self) -> UnitOfWork:
        self._conn = await self._engine.connect()
        if self._isolation_level:
            # Sent with the BEGIN itself (asyncpg starts the transaction with it), not as a
            # statement of its own; the pool puts the default back when the connection returns.
            await self._conn.execution_options(isolation_level=self._isolation_level)
        await self._conn.begin()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._conn is not None
        try:
            if not self.committed:
                await self._conn.rollback()
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
        envelope = Envelope.new(saga_id=saga_id, event_type=event_type,
                                schema_version=schema.version, source_service=self.service,
                                payload=payload,
                                parent_span_id=cause.span_id if cause else parent_span_id,
                                metadata=meta)
        tp = self._traceparent()
        self._outgoing.append(_OutgoingRow(envelope, schema.topic, saga_id, event_type,
                                           schema.version, envelope.to_dict(),
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

    async def commit(self) -> None:
        with tracing.tracer().start_as_current_span(
                "db commit", attributes={"db.system": "postgresql",
                                         "saga.outbox_rows": len(self._outgoing)}):
            await self._commit()

    async def _commit(self) -> None:
        conn = self.connection
        if self._claim or self._outgoing:
            params: dict[str, Any] = {}
            if self._claim:
                params.update(message_id=self._claim.message_id,
                              event_type=self._claim.event_type, saga_id=self._claim.saga_id,
                              inbox_status=self._claim.status)
            if self._outgoing:
                params.update(self._outbox_params())
            statement = _commit_statement(self.tables.schema, self._claim is not None,
                                          bool(self._outgoing))
            if not (await conn.execute(statement, params)).scalar_one():
                await conn.rollback()
                raise AlreadyProcessed(self._claim.message_id if self._claim else "")
        try:
            await conn.commit()
        except Exception as exc:
            if is_connection_failure(exc):
                self.committed = True  # nothing left to roll back on a dead connection
                raise CommitOutcomeUnknown(f"connection lost during COMMIT: {exc!r}") from exc
            raise
        self.committed = True
        for callback in self._after_commit:
            callback()

    def _outbox_params(self) -> dict[str, Any]:
        return {
            "lock_keys": sorted({f"{self.tables.schema}:{r.key}" for r in self._outgoing}),
            "channel": self.tables.notify_channel,
            "rows": json.dumps([{
                "message_id": r.envelope.message_id if r.envelope else str(uuid.uuid4()),
                "saga_id": r.key,
                "topic": r.topic,
                "event_type": r.event_type,
                "schema_version": r.schema_version,
                "payload": r.value,
                "headers": r.headers,
                "traceparent": r.traceparent,
            } for r in self._outgoing], separators=(",", ":"), ensure_ascii=False)}

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Runs ``callback`` once the transaction has committed (never if it rolls back)."""
        self._after_commit.append(callback)


UnitOfWorkFactory = Callable[..., UnitOfWork]
