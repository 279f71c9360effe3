"""Polling outbox relay (Part I §4.3 option A), woken when rows are committed.

How it learns of rows: the unit of work that commits outbox rows tells the relay of its
process through its ``OutboxSignal``, after the commit. A leading relay then selects. A
standby relay (another replica leads) passes the news on to the leader with a ``NOTIFY`` of its
own, on its own connection, one at a time: commits that come while one is on its way share the
next (ADR 0010). Only a process with no relay connected sends the ``NOTIFY`` with its commit.
The leader listens on its own connection, and selects at least every poll interval anyway. (A
NOTIFY with every commit serialised the commits of all three services, and the notifications
that carried the rows with it are gone: ADR 0007, which replaces ADR 0004.)

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
  the relay's own connection, named ``leadership_key``); the others stand by and take over when
  it dies. Who leads shows as ``outbox_relay_leader`` (1 on the leader's instance), in each
  instance's ``/ready`` and as the holder of that lock in ``pg_locks`` (``RELAY_LEADERS``).
- A row committed late is never skipped: the relay selects by status, not "after the last id".
- Broker unavailable: the relay backs off (capped) and retries the same rows for as long as it
  takes; the backlog shows in ``outbox_pending_messages``. A row whose send timed out is not
  sent again while the producer still holds it: the relay waits for its outcome first
  (``Publisher.settle``), so a timeout alone never puts a row on its topic twice.
- A row Kafka refuses for itself (too large, unknown topic...) is counted and its error kept on
  the row (``outbox_publish_errors_total``), and marked failed (``outbox_failed_messages``) at
  once when it can never be published, after ``relay_max_attempts`` when it might (a topic
  created late); later rows of the same saga wait behind it until an operator resolves it, and
  the rows of every other saga are published meanwhile (``sagakit.outbox.publisher``).

The relay's statements and session are in ``sagakit.outbox.statements``; the deletion of
published rows and the outbox gauges, periodic jobs, in ``sagakit.outbox.housekeeping``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg
from aiokafka.errors import KafkaError
from sqlalchemy.ext.asyncio import AsyncEngine

from sagakit import faults, jsonio
from sagakit.backoff import Backoff
from sagakit.observability import metrics
from sagakit.outbox.publisher import BROKER_UNAVAILABLE, Publisher
from sagakit.outbox.signal import OutboxSignal
from sagakit.outbox.statements import (
    MARK,
    MARK_AND_SELECT,
    NOTIFY_LEADER,
    RELAY_SESSION,
    OutboxRow,
    leadership_key,
)
from sagakit.settings import MessagingSettings
from sagakit.store.postgres_url import postgres_target
from sagakit.store.tables import OUTBOX_FAILED, OUTBOX_PENDING, OUTBOX_PUBLISHED, MessagingTables

log = logging.getLogger("sagakit.relay")

# How long an acknowledged row may wait for the next batch's select to mark it published.
MARK_WITHIN_S = 0.5


class OutboxRelay:
    def __init__(self, engine: AsyncEngine, tables: MessagingTables, service: str,
                 settings: MessagingSettings, signal: OutboxSignal | None = None,
                 instance: str = "") -> None:
        self.engine = engine
        self.application_name = (f"{service}-relay@{instance}" if instance
                                 else f"{service}-relay")[:63]
        """Its connection's, in ``pg_stat_activity``: names the instance that holds the lead."""
        self.signal = signal or OutboxSignal()
        """Hand it to the units of work of this process (``UnitOfWork(signal=...)``)."""
        self.tables = tables
        self.service = service
        self.settings = settings
        self._wake = asyncio.Event()
        self._leader = False
        self._listen_conn: asyncpg.Connection | None = None
        self._backoff = Backoff(0.1, 2.0, settings.relay_backoff_cap_s)
        self._failures = 0
        self.published_total = 0
        # Acknowledged by Kafka, not yet marked published: (message id, acknowledged at).
        self._acked: list[tuple[str, datetime]] = []
        self._last_select = 0.0
        self.publisher = Publisher(engine, tables, service, settings,
                                   faults.with_publish_faults(self._note_acked, settings))

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
                    await self._stand_by(stop)
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
        await self.publisher.stop()
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
            await self.publisher.after_broker_failure()
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
        await self._listen_conn.execute(self._statement(MARK), ids, times)
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
        """Leading or not; either way commits of this process signal this relay as long as it
        has a connection (to select, or to pass them on), and notify by themselves otherwise."""
        self._leader = leading
        metrics.RELAY_LEADER.labels(self.service).set(1 if leading else 0)
        if leading:
            self.signal.leading(self._wake.set)
        elif self._listen_conn is not None and not self._listen_conn.is_closed():
            self.signal.standing_by(self._wake.set)
        else:
            self.signal.standing_down()

    async def _stand_by(self, stop: asyncio.Event) -> None:
        """Until its next try for the lead, a poll interval from now: passes the commits of
        this process on to the leader, one ``NOTIFY`` at a time (ADR 0010)."""
        deadline = time.monotonic() + self.settings.relay_poll_interval_s
        while (left := deadline - time.monotonic()) > 0:
            if not await self._wait(stop, left) or stop.is_set():
                return
            await self._forward_commits()

    async def _forward_commits(self) -> None:
        """Wakes the leader for every commit signalled so far. Its own transaction, on the
        relay's session (asynchronous commit): it takes PostgreSQL's notification lock for
        a moment, and no business commit waits for it."""
        assert self._listen_conn is not None
        await self._listen_conn.execute(NOTIFY_LEADER, self.tables.notify_channel)
        metrics.RELAY_WAKEUPS_FORWARDED.labels(self.service).inc()

    async def _ensure_connection(self) -> None:
        if self._listen_conn is not None and not self._listen_conn.is_closed():
            return
        self._lead(False)
        # The pool's URL, TLS parameters included (sagakit.store.postgres_url).
        target = postgres_target(self.engine.url)
        self._listen_conn = await asyncpg.connect(
            target.dsn(), timeout=10, **target.connect_args(
                {**RELAY_SESSION, "application_name": self.application_name}))
        await self._listen_conn.add_listener(self.tables.notify_channel, self._on_notify)

    def _on_notify(self, *args: Any) -> None:
        """asyncpg's listener callback (connection, pid, channel, payload): rows were
        committed by a process whose own relay does not lead (passed on by its standby relay,
        or sent with the commit where no relay runs)."""
        if self._leader:  # a standby tries for the lead at its poll, not on every commit
            self._wake.set()

    async def _try_lead(self) -> None:
        assert self._listen_conn is not None
        self._lead(bool(await self._listen_conn.fetchval(
            "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", self.leadership_key)))
        if self._leader:
            log.info("relay is the active publisher", extra={"service": self.service})

    @property
    def leadership_key(self) -> str:
        """The advisory lock the leader holds (``hashtextextended(key, 0)``)."""
        return leadership_key(self.tables.schema)

    async def _drop_connection(self) -> None:
        conn, self._listen_conn = self._listen_conn, None
        self._lead(False)  # the leadership lock goes with the connection
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)

    # ------------------------------------------------------------------ publishing

    async def publish_batch(self) -> int:
        """Publishes the oldest pending rows, selected by a statement that also marks the rows
        acknowledged before. Returns how many were acknowledged (they are marked later: by the
        next select, or by a statement of their own, see ``_idle``)."""
        if self._listen_conn is None or self._listen_conn.is_closed():
            await self._ensure_connection()
        assert self._listen_conn is not None
        if self.publisher.in_flight:
            # Sends an earlier batch gave up on are resolved first, so that this select marks
            # those Kafka acknowledged and selects again only those that failed.
            await self.publisher.settle()
        return await self.publisher.publish(await self._select())

    async def _select(self) -> list[OutboxRow]:
        """Marks the rows acknowledged so far and selects the oldest pending rows."""
        assert self._listen_conn is not None
        self._last_select = time.monotonic()
        ids, times = self._acked_columns()
        records = await self._listen_conn.fetch(
            self._statement(MARK_AND_SELECT), ids, times, self.settings.relay_batch_size)
        del self._acked[:len(ids)]
        return [OutboxRow(r["message_id"], r["topic"], r["saga_id"], jsonio.loads(r["payload"]),
                           jsonio.loads(r["headers"]), r["created_at"], r["attempts"],
                           r["traceparent"], r["event_type"]) for r in records]

    def _note_acked(self, rows: list[OutboxRow]) -> None:
        """Rows Kafka acknowledged: marked published with the next select, or by a statement
        of their own within ``MARK_WITHIN_S``."""
        now = datetime.now(UTC)
        self._acked.extend((row.message_id, now) for row in rows)
        for row in rows:
            metrics.RELAY_COMMIT_TO_ACK.labels(self.service).observe(
                max(0.0, (now - row.created_at).total_seconds()))
        metrics.RELAY_PUBLISHED.labels(self.service).inc(len(rows))
        self.published_total += len(rows)
        self._failures = 0
