"""Polling outbox relay (Part I §4.3 option A), woken when rows are committed.

How it learns of rows: the unit of work that commits outbox rows tells the relay through its
``OutboxSignal`` — in the process, when this relay leads and runs there; by a ``NOTIFY`` on
the relay's channel otherwise (a relay listens on its own connection). Either way the relay
then selects the pending rows, and it selects at least every poll interval anyway. (A NOTIFY
with every commit serialised the commits of all three services, and the notifications that
carried the rows with it are gone: ADR 0007, which replaces ADR 0004.)

Guarantees:
- A row is marked published only after Kafka acknowledged it (acks=all, idempotent producer).
  A crash in between republishes it; the consumers' inbox absorbs the duplicate.
- A row's mark travels with the relay's next select (``published_at`` is the time of Kafka's
  acknowledgement), or a statement of its own marks it, ``MARK_WITHIN_S`` after the
  acknowledgement, when no select came before.
- Per-saga order: rows are read in id order, and the unit of work gives one saga's rows ids in
  commit order (a later row of a saga is never visible before an earlier one). A row waits
  behind an earlier row of its saga that was given up on (failed).
- Only one relay instance of a service publishes at a time (a session advisory lock held on
  the relay's own connection); the others stand by and take over when it dies.
- A row committed late is never skipped: the relay selects by status, not "after the last id".
- Broker unavailable: the relay backs off (capped) and retries the same rows for as long as it
  takes; the backlog shows in ``outbox_pending_messages``. A row Kafka refuses for itself
  (too large, unknown topic...) is counted and its error kept on the row
  (``outbox_publish_errors_total``), and marked failed (``outbox_failed_messages``) at once when
  it can never be published, after ``relay_max_attempts`` when it might (a topic created
  late); later rows of the same saga wait behind it until an operator resolves it, and the
  rows of every other saga are published meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from aiokafka.errors import (
    InvalidTopicError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from opentelemetry.trace import SpanKind
from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from sagakit import jsonio, metrics, tracing
from sagakit.backoff import Backoff
from sagakit.faults import crash_now
from sagakit.kafka import durable_producer
from sagakit.outbox_signal import OutboxSignal
from sagakit.settings import MessagingSettings
from sagakit.tables import OUTBOX_FAILED, OUTBOX_PENDING, OUTBOX_PUBLISHED, MessagingTables

log = logging.getLogger("sagakit.relay")

# Errors that say "the broker is not there right now", not "this row is bad".
BROKER_UNAVAILABLE = (KafkaConnectionError, KafkaTimeoutError, asyncio.TimeoutError, OSError)
# Errors with which Kafka refuses one record for what it is (its size, its topic), whether
# ``send`` raises them at once or the acknowledgement carries them: that row is the one to
# count and give up on, never a reason to hold up the rows of other sagas.
ROW_REFUSED = (MessageSizeTooLargeError, RecordListTooLargeError, UnknownTopicOrPartitionError,
               TopicAuthorizationFailedError, InvalidTopicError)

# How long an acknowledged row may wait for the next batch's select to mark it published.
MARK_WITHIN_S = 0.5

# Marks the rows acknowledged since the last statement (message ids $1, acknowledged at $2) and
# selects the next batch. The select sees the snapshot from before the mark, so it leaves those
# rows out by message id. A row waits behind an earlier row of its saga that was given up on
# (failed).
# The statuses are written into the text, not bound: the relay's connection plans each
# statement once (generic plans, see ``_RELAY_SESSION``), and only a plan that knows the status
# can use the partial indexes on pending and failed rows; with the status a parameter the
# generic plan walks the whole outbox.
_MARK_AND_SELECT = """
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
_MARK = """
UPDATE {outbox} o SET status = '{published}', published_at = a.acked_at,
                      attempts = o.attempts + 1
FROM unnest($1::uuid[], $2::timestamptz[]) AS a(message_id, acked_at)
WHERE o.message_id = a.message_id"""
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
_RELAY_SESSION = {"synchronous_commit": "off", "plan_cache_mode": "force_generic_plan"}


def asyncpg_dsn(url: URL | str) -> str:
    from sqlalchemy.engine import make_url

    u = make_url(url) if isinstance(url, str) else url
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


@dataclass(frozen=True)
class _OutboxRow:
    message_id: str
    topic: str
    saga_id: str
    payload: dict[str, Any]
    headers: dict[str, str]
    created_at: datetime
    attempts: int
    traceparent: str | None
    event_type: str


class OutboxRelay:
    def __init__(self, engine: AsyncEngine, tables: MessagingTables, service: str,
                 settings: MessagingSettings, signal: OutboxSignal | None = None) -> None:
        self.engine = engine
        self.signal = signal or OutboxSignal()
        """Hand it to the units of work of this process (``UnitOfWork(signal=...)``)."""
        self.tables = tables
        self.service = service
        self.settings = settings
        self._wake = asyncio.Event()
        self._leader = False
        self._listen_conn: asyncpg.Connection | None = None
        self._producer: Any = None
        self._backoff = Backoff(0.1, 2.0, settings.relay_backoff_cap_s)
        self._failures = 0
        self.published_total = 0
        # Acknowledged by Kafka, not yet marked published: (message id, acknowledged at).
        self._acked: list[tuple[str, datetime]] = []
        self._last_select = 0.0

    @property
    def is_leader(self) -> bool:
        return self._leader

    # ------------------------------------------------------------------ lifecycle

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self._ensure_connection()
                if not self._leader:
                    await self._try_lead()
                if not self._leader:
                    await self._wait(stop, self.settings.relay_poll_interval_s)
                    continue
                published = await self.publish_batch()
                if published < self.settings.relay_batch_size:
                    # The select saw every row committed before it, and a row committed since
                    # has signalled (in the process, or by a NOTIFY delivered after its
                    # commit), which ends this wait at once. Selecting again straight away
                    # found nothing at low rates: one empty round trip per event and service.
                    await self._idle(stop)
            except asyncio.CancelledError:
                raise
            except (*BROKER_UNAVAILABLE, KafkaError) as exc:
                await self._on_failure(stop, exc, broker=True)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
                await self._drop_connection()
                await self._on_failure(stop, exc, broker=False)
            except Exception as exc:
                log.exception("relay error", extra={"service": self.service})
                await self._on_failure(stop, exc, broker=False)
        await self.close()

    async def close(self) -> None:
        await self._stop_producer()
        if self._acked and self._listen_conn is not None:
            with contextlib.suppress(Exception):  # else published again after a restart
                await self._mark_acked()
        await self._drop_connection()

    async def _on_failure(self, stop: asyncio.Event, exc: BaseException, *, broker: bool) -> None:
        # Whatever failed, what was published or pending is the next select's to find again.
        self._failures += 1
        delay = self._backoff.delay(self._failures)
        metrics.RELAY_PUBLISH_ERRORS.labels(self.service, type(exc).__name__).inc()
        log.warning("relay %s error, retrying in %.2fs: %r",
                    "broker" if broker else "database", delay, exc,
                    extra={"service": self.service, "attempt": self._failures})
        if broker:
            await self._stop_producer()
        await self._wait(stop, delay)

    async def _wait(self, stop: asyncio.Event, wait_s: float) -> bool:
        """Waits for a commit's signal, ``stop`` or ``wait_s``; True unless the time ran out."""
        waiter = asyncio.ensure_future(self._wake.wait())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            done, _ = await asyncio.wait({waiter, stopper}, timeout=wait_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            stopper.cancel()
        self._wake.clear()
        return bool(done)

    async def _idle(self, stop: asyncio.Event) -> None:
        """Waits for the next commit's signal or until the periodic select is due. Rows
        acknowledged and not yet marked ride on the next select; if nothing wakes the relay
        within ``MARK_WITHIN_S``, they are marked by a statement of their own."""
        until_select = max(0.0, self._until_select())
        if not self._acked or until_select <= MARK_WITHIN_S:
            await self._wait(stop, until_select)
            return
        if not await self._wait(stop, MARK_WITHIN_S):
            await self._mark_acked()
            await self._wait(stop, until_select - MARK_WITHIN_S)

    async def _mark_acked(self) -> None:
        assert self._listen_conn is not None
        ids, times = self._acked_columns()
        await self._listen_conn.execute(self._statement(_MARK), ids, times)
        del self._acked[:len(ids)]

    def _acked_columns(self) -> tuple[list[str], list[datetime]]:
        return [i for i, _ in self._acked], [t for _, t in self._acked]

    def _until_select(self) -> float:
        """Seconds until the periodic select is due (at most a poll interval after the last
        one); zero or less: due."""
        return self._last_select + self.settings.relay_poll_interval_s - time.monotonic()

    def _statement(self, template: str) -> str:
        return template.format(outbox=f'"{self.tables.schema}".outbox',
                               published=OUTBOX_PUBLISHED, pending=OUTBOX_PENDING,
                               failed=OUTBOX_FAILED)

    # ------------------------------------------------------------------ leadership

    def _lead(self, leading: bool) -> None:
        self._leader = leading
        if leading:
            self.signal.leading(self._wake.set)
        else:
            self.signal.standing_down()

    async def _ensure_connection(self) -> None:
        if self._listen_conn is not None and not self._listen_conn.is_closed():
            return
        self._lead(False)
        self._listen_conn = await asyncpg.connect(
            asyncpg_dsn(self.engine.url), timeout=10,
            server_settings={**_RELAY_SESSION, "application_name": f"{self.service}-relay"})
        await self._listen_conn.add_listener(self.tables.notify_channel, self._on_notify)

    def _on_notify(self, *args: Any) -> None:
        """asyncpg's listener callback (connection, pid, channel, payload): rows were
        committed by a process whose own relay does not lead."""
        if self._leader:  # a standby tries for the lead at its poll, not on every commit
            self._wake.set()

    async def _try_lead(self) -> None:
        assert self._listen_conn is not None
        key = f"outbox-relay:{self.tables.schema}"
        self._lead(bool(await self._listen_conn.fetchval(
            "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key)))
        if self._leader:
            log.info("relay is the active publisher", extra={"service": self.service})

    async def _drop_connection(self) -> None:
        self._lead(False)  # the leadership lock goes with the connection
        if self._listen_conn is not None:
            with contextlib.suppress(Exception):
                await self._listen_conn.close(timeout=2)
        self._listen_conn = None

    # ------------------------------------------------------------------ publishing

    async def _ensure_producer(self) -> Any:
        if self._producer is None:
            producer = durable_producer(self.settings.kafka_bootstrap_servers,
                                        f"{self.service}-relay")
            try:
                await asyncio.wait_for(producer.start(), self.settings.relay_publish_timeout_s)
            except BaseException:
                with contextlib.suppress(Exception):
                    await producer.stop()
                raise
            self._producer = producer
        return self._producer

    async def _stop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), 5)

    async def publish_batch(self) -> int:
        """Publishes the oldest pending rows, selected by a statement that also marks the rows
        acknowledged before. Returns how many were acknowledged (they are marked later: by the
        next select, or by a statement of their own, see ``_idle``)."""
        if self._listen_conn is None or self._listen_conn.is_closed():
            await self._ensure_connection()
        assert self._listen_conn is not None
        return await self._publish(await self._select())

    async def _select(self) -> list[_OutboxRow]:
        """Marks the rows acknowledged so far and selects the oldest pending rows."""
        assert self._listen_conn is not None
        self._last_select = time.monotonic()
        ids, times = self._acked_columns()
        records = await self._listen_conn.fetch(
            self._statement(_MARK_AND_SELECT), ids, times, self.settings.relay_batch_size)
        del self._acked[:len(ids)]
        return [_OutboxRow(r["message_id"], r["topic"], r["saga_id"], jsonio.loads(r["payload"]),
                           jsonio.loads(r["headers"]), r["created_at"], r["attempts"],
                           r["traceparent"], r["event_type"]) for r in records]

    async def _publish(self, rows: list[_OutboxRow]) -> int:
        """Sends the rows in order and waits for Kafka's acknowledgements. A row Kafka refuses
        for itself (``ROW_REFUSED``, whether ``send`` raises it or the acknowledgement carries
        it) is counted and, when it can never be published, given up on (``_refuse``); the
        later rows of its saga wait behind it and every other row goes on. Anything else that
        fails (the broker away, the producer broken) ends the batch: the rows acknowledged
        before it are marked, the others are sent again after a backoff."""
        if not rows:
            return 0
        producer = await self._ensure_producer()
        sent: list[tuple[_OutboxRow, asyncio.Future[Any]]] = []
        # Refused rows, and whether the refusal is the row's own for certain: raised by send()
        # for that record alone, not carried by the acknowledgement of a produce request that
        # may have held other rows too.
        refused: list[tuple[_OutboxRow, BaseException, bool]] = []
        held: set[str] = set()  # sagas with a refused row: their later rows wait behind it
        # A topic that does not exist refuses every row of it, and finding that out takes
        # aiokafka a metadata wait (its request timeout): asked once a batch.
        topic_refused: dict[str, BaseException] = {}
        failure: BaseException | None = None
        failed_row: _OutboxRow | None = None
        for row in rows:
            if row.saga_id in held:
                continue
            refusal = topic_refused.get(row.topic)
            if refusal is None:
                try:
                    sent.append((row, await self._send(producer, row)))
                    continue
                except ROW_REFUSED as exc:
                    if (isinstance(exc, UnknownTopicOrPartitionError)
                            and not await self._cluster_answers(producer)):
                        # aiokafka says the same when it could not ask: the broker is away.
                        failure = exc
                        break
                    refusal = exc
                    if not isinstance(exc, MessageSizeTooLargeError):
                        topic_refused[row.topic] = exc
                except Exception as exc:
                    failure = exc  # not about this row: sent again after the backoff
                    break
            refused.append((row, refusal, True))
            held.add(row.saga_id)
        acked: list[_OutboxRow] = []
        if sent:
            # One wait for the whole batch. Awaiting each future in turn costs an event-loop
            # iteration per row even when it is already resolved, and under load one iteration
            # takes milliseconds: a batch of 200 rows took seconds to be "acknowledged".
            await asyncio.wait([fut for _, fut in sent],
                               timeout=self.settings.relay_publish_timeout_s)
        for i, (row, fut) in enumerate(sent):
            if row.saga_id in held:
                # Behind a refused row of its saga: sent again once that one is resolved.
                fut.add_done_callback(lambda f: f.cancelled() or f.exception())
                continue
            if not fut.done():
                failure, failed_row = KafkaTimeoutError(
                    f"no acknowledgement within {self.settings.relay_publish_timeout_s}s"), row
            elif (error := fut.exception()) is None:
                acked.append(row)
                continue
            elif isinstance(error, ROW_REFUSED) and not isinstance(
                    error, UnknownTopicOrPartitionError):
                refused.append((row, error, False))
                held.add(row.saga_id)
                continue
            else:
                failure, failed_row = error, row
            for _, rest in sent[i:]:
                # The rest of a failed batch is sent again next time; their outcome is not
                # needed.
                rest.add_done_callback(lambda f: f.cancelled() or f.exception())
            break
        if acked and self.settings.crash_after_publish:
            if any(row.event_type == self.settings.crash_after_publish for row in acked):
                crash_now("relay: after broker ack, before marking published",
                          self.settings.crash_after_publish)
        if acked:
            now = datetime.now(UTC)
            self._acked.extend((row.message_id, now) for row in acked)
            for row in acked:
                metrics.RELAY_COMMIT_TO_ACK.labels(self.service).observe(
                    max(0.0, (now - row.created_at).total_seconds()))
            metrics.RELAY_PUBLISHED.labels(self.service).inc(len(acked))
            self.published_total += len(acked)
            self._failures = 0
        for row, refusal, certain in refused:
            await self._refuse(row, refusal, certain)
        if failure is not None:
            if failed_row is not None:
                await self._record_failure(failed_row, failure, give_up=(
                    not isinstance(failure, BROKER_UNAVAILABLE)
                    and failed_row.attempts + 1 >= self.settings.relay_max_attempts))
            raise failure
        return len(acked)

    async def _send(self, producer: Any, row: _OutboxRow) -> asyncio.Future[Any]:
        value = jsonio.dumpb(row.payload)
        row_headers = dict(row.headers)
        # The trace goes on from the transaction that wrote the row, through this publish.
        with tracing.span(
                f"{row.topic} publish", traceparent=row.traceparent, kind=SpanKind.PRODUCER,
                attributes=tracing.attributes(id=row.saga_id, event_type=row.event_type)):
            if tracing.enabled():
                row_headers["traceparent"] = tracing.current_traceparent() or ""
            headers = [(k, str(v).encode()) for k, v in row_headers.items() if v != ""]
            future: asyncio.Future[Any] = await producer.send(
                row.topic, value=value, key=row.saga_id.encode(), headers=headers)
            return future

    async def _cluster_answers(self, producer: Any) -> bool:
        """Whether the cluster answers a metadata request now."""
        try:
            return bool(await asyncio.wait_for(producer.client.force_metadata_update(),
                                               self.settings.relay_publish_timeout_s))
        except (KafkaError, *BROKER_UNAVAILABLE):
            return False

    async def _refuse(self, row: _OutboxRow, exc: BaseException, certain: bool) -> None:
        """Kafka refused ``row`` for itself. It is counted with its error and, when it can never
        be published (a refusal that is ``certain`` and that Kafka does not call retriable: too
        large, a topic it may not write) or has used up ``relay_max_attempts`` (a topic that
        does not exist yet; a refusal of a whole produce request, which may have been another
        row's), given up on: marked failed, for an operator, with its saga's later rows
        waiting behind it."""
        metrics.RELAY_PUBLISH_ERRORS.labels(self.service, type(exc).__name__).inc()
        give_up = ((certain and not getattr(exc, "retriable", False))
                   or row.attempts + 1 >= self.settings.relay_max_attempts)
        if not give_up:
            log.warning("outbox row %s refused by Kafka (attempt %s), its saga's later rows "
                        "wait: %r", row.message_id, row.attempts + 1, exc,
                        extra={"service": self.service, "saga_id": row.saga_id,
                               "event_type": row.event_type, "attempt": row.attempts + 1})
        await self._record_failure(row, exc, give_up=give_up)

    async def _record_failure(self, row: _OutboxRow, exc: BaseException, *,
                              give_up: bool) -> None:
        o = self.tables.outbox
        async with self.engine.begin() as conn:
            await conn.execute(update(o).where(o.c.message_id == row.message_id).values(
                attempts=o.c.attempts + 1, last_error=repr(exc)[:2000],
                status=OUTBOX_FAILED if give_up else OUTBOX_PENDING))
        if give_up:
            log.error("outbox row %s marked failed after %s attempts: %r", row.message_id,
                      row.attempts + 1, exc, extra={"service": self.service,
                                                   "saga_id": row.saga_id,
                                                   "event_type": row.event_type})

    # ------------------------------------------------------------------ housekeeping

    async def refresh_gauges(self) -> None:
        o = self.tables.outbox
        async with self.engine.connect() as conn:
            pending, oldest = (await conn.execute(
                select(func.count(), func.min(o.c.created_at)).where(o.c.status == OUTBOX_PENDING)
            )).one()
            failed = (await conn.execute(
                select(func.count()).where(o.c.status == OUTBOX_FAILED))).scalar_one()
            db_now = (await conn.execute(select(func.now()))).scalar_one()
        metrics.OUTBOX_PENDING.labels(self.service).set(pending)
        metrics.OUTBOX_FAILED.labels(self.service).set(failed)
        metrics.OUTBOX_OLDEST_AGE.labels(self.service).set(
            (db_now - oldest).total_seconds() if oldest else 0)

    async def cleanup(self) -> int:
        """Deletes published rows past their retention, in bounded batches."""
        o = self.tables.outbox
        removed = 0
        cutoff = func.now() - func.make_interval(0, 0, 0, 0, 0, 0,
                                                 self.settings.outbox_retention_days * 86400)
        while True:
            ids = (select(o.c.id).where(o.c.status == OUTBOX_PUBLISHED,
                                        o.c.published_at < cutoff)
                   .limit(self.settings.cleanup_batch_size).scalar_subquery())
            async with self.engine.begin() as conn:
                n = (await conn.execute(delete(o).where(o.c.id.in_(ids)))).rowcount
            removed += n
            if n < self.settings.cleanup_batch_size:
                return removed
