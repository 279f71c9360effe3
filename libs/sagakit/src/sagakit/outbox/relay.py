"""Polling outbox relay (docs/standard.md#relay), woken when rows are committed.

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
- One relay instance of a service leads at a time: it holds the outbox's lease
  (``sagakit.outbox.leadership``, ADR 0012), renewed on its own connection while its loop
  makes progress. The others stand by and take over when the lease runs out (the leader hung,
  or cut off from PostgreSQL: within ``relay_lease_s`` and a poll), when the leader's backend is
  gone (killed: at their next poll), or when the leader gives it up (stopped, or no round of
  publishing finished for ``relay_stall_s``: Kafka unreachable). A relay that lost the lead
  sends nothing more and its writes to the outbox are refused (the lease's epoch). Who leads
  shows as ``outbox_relay_leader`` (1 on the leader's instance), in each instance's ``/ready``
  and in the lease's row (``holder``); ``outbox_relay_lead_lost_total`` counts why leads end.
- A row committed late is never skipped: the relay selects by status, not "after the last id".
- Broker unavailable: the relay backs off (capped) and retries the same rows; past
  ``relay_stall_s`` it gives the lead to another instance, which may reach Kafka, and the rows
  wait for as long as it takes; the backlog shows in ``outbox_pending_messages``. A row whose
  send timed out is not sent again while the producer still holds it: the relay waits for its
  outcome first (``Publisher.settle``), so a timeout alone never puts a row on its topic twice
  (a relay that lost the lead forgets such sends: they are the next leader's to send).
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
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg
from aiokafka.errors import KafkaError
from sqlalchemy.ext.asyncio import AsyncEngine

from sagakit import jsonio, plugins
from sagakit.backoff import Backoff
from sagakit.observability import metrics
from sagakit.outbox import leadership
from sagakit.outbox.leadership import LeadLost, Lease
from sagakit.outbox.publisher import BROKER_UNAVAILABLE, Publisher
from sagakit.outbox.statements import (
    MARK,
    MARK_AND_SELECT,
    NOTIFY_LEADER,
    RELAY_SESSION,
    OutboxRow,
)
from sagakit.schema_versions.use import SCHEMA_USE
from sagakit.settings import MessagingSettings
from sagakit.store.outbox_signal import OutboxSignal
from sagakit.store.postgres_url import postgres_target
from sagakit.store.tables import OUTBOX_FAILED, OUTBOX_PENDING, OUTBOX_PUBLISHED, MessagingTables

log = logging.getLogger("sagakit.relay")

T = TypeVar("T")

# How long an acknowledged row may wait for the next batch's select to mark it published.
MARK_WITHIN_S = 0.5
# After giving the lead up, a relay stands aside for this many poll intervals: long enough for
# a standby (which tries once a poll interval) to take it first.
ASIDE_POLLS = 3


class RelayConnectionLost(Exception):
    """The relay's own connection failed or did not answer in time: it is closed, and the lead
    goes with it."""


class OutboxRelay:
    def __init__(self, engine: AsyncEngine, tables: MessagingTables, service: str,
                 settings: MessagingSettings, signal: OutboxSignal | None = None,
                 instance: str = "") -> None:
        self.engine = engine
        self.application_name = (f"{service}-relay@{instance}" if instance
                                 else f"{service}-relay")[:63]
        """Its connection's, in ``pg_stat_activity``, and the lease's ``holder`` while it
        leads: names the instance."""
        self.signal = signal or OutboxSignal()
        """Hand it to the units of work of this process (``UnitOfWork(signal=...)``)."""
        self.tables = tables
        self.service = service
        self.settings = settings
        self.lease = Lease(tables.schema, self.application_name, settings.relay_lease_s)
        self._wake = asyncio.Event()
        self._leader = False
        self._lost: tuple[str, str] | None = None
        """Why the lead was lost (reason, detail), until the loop has stepped down."""
        self._aside_until = 0.0
        self._progress_at = 0.0
        """When the loop last finished a round of publishing (monotonic)."""
        self._listen_conn: asyncpg.Connection | None = None
        # The loop's statements and the lease's renewals share the connection, one at a time.
        self._conn_lock = asyncio.Lock()
        self._backoff = Backoff(0.1, 2.0, settings.relay_backoff_cap_s)
        self._failures = 0
        self.published_total = 0
        # Acknowledged by Kafka, not yet marked published: (message id, acknowledged at).
        self._acked: list[tuple[str, datetime]] = []
        self._last_select = 0.0
        self._mark_and_select = self._statement(MARK_AND_SELECT, epoch_param=4)
        self._mark = self._statement(MARK, epoch_param=3)
        self.publisher = Publisher(engine, tables, service, settings,
                                   plugins.wrapped(self._note_acked, "wrap_acked",
                                                   plugins.load(settings.plugins)),
                                   may_send=self._may_send, epoch=lambda: self.lease.epoch)

    @property
    def is_leader(self) -> bool:
        """Leads, and its lease has not run out by this process's clock."""
        return self._leader and self.lease.valid()

    # ------------------------------------------------------------------ lifecycle

    async def run(self, stop: asyncio.Event) -> None:
        keeper = asyncio.create_task(self._keep_lead(stop), name=f"{self.service}-relay-lease")
        try:
            while not stop.is_set():
                try:
                    await self._round(stop)
                except asyncio.CancelledError:
                    raise
                except LeadLost as exc:
                    self._lose("expired", str(exc))  # stepped down at the next round
                except (RelayConnectionLost, asyncpg.PostgresError,
                        asyncpg.InterfaceError) as exc:
                    await self._drop_connection()
                    await self._on_failure(stop, exc, broker=False)
                except (*BROKER_UNAVAILABLE, KafkaError) as exc:
                    await self._on_failure(stop, exc, broker=True)
                except Exception as exc:
                    log.exception("relay error", extra={"service": self.service})
                    await self._on_failure(stop, exc, broker=False)
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        await self.close()

    async def _round(self, stop: asyncio.Event) -> None:
        await self._ensure_connection()
        if self._lost is not None:
            await self._step_down()
        if not self._leader and time.monotonic() >= self._aside_until:
            await self._try_lead()
        if not self._leader:
            await self._stand_by(stop)
            return
        published = await self.publish_batch()
        self._progress_at = time.monotonic()
        if published < self.settings.relay_batch_size:
            # The select saw every row committed before it, and a row committed since has
            # signalled (in the process, or by a NOTIFY delivered after its commit), which
            # ends this wait at once. Selecting again straight away found nothing at low
            # rates: one empty round trip per event and service.
            await self._idle(stop)

    async def lead(self) -> bool:
        """Connects and tries for the lead once, as ``run`` does at each poll (for tools and
        tests that publish batches themselves); True if this relay leads now."""
        await self._ensure_connection()
        if not self._leader:
            await self._try_lead()
        return self.is_leader

    async def close(self) -> None:
        await self.publisher.stop()
        if self._acked and self.lease.valid():
            with contextlib.suppress(Exception):  # else published again after a restart
                await self._mark_acked()
        epoch = self.lease.forget()
        if epoch is not None:
            # The next leader need not wait for the lease to run out.
            with contextlib.suppress(Exception):
                await self._on_conn(lambda conn: self.lease.release(conn, epoch), timeout=2)
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
        if not await self._wait(stop, MARK_WITHIN_S) and self._lost is None:
            await self._mark_acked()
            await self._wait(stop, until_select - MARK_WITHIN_S)

    async def _mark_acked(self) -> None:
        epoch = self._epoch()
        ids, times = self._acked_columns()
        await self._on_conn(lambda conn: conn.execute(self._mark, ids, times, epoch))
        del self._acked[:len(ids)]

    def _acked_columns(self) -> tuple[list[str], list[datetime]]:
        return [i for i, _ in self._acked], [t for _, t in self._acked]

    def _until_select(self) -> float:
        """Seconds until the periodic select is due (at most a poll interval after the last
        one); zero or less: due."""
        return self._last_select + self.settings.relay_poll_interval_s - time.monotonic()

    def _statement(self, template: str, epoch_param: int) -> str:
        """``template`` for this outbox, its fence on the epoch bound as ``$epoch_param``."""
        fenced = leadership.statement(leadership.FENCED, self.tables.schema).format(
            epoch=epoch_param)
        return template.format(outbox=f'"{self.tables.schema}".outbox', fenced=fenced,
                               published=OUTBOX_PUBLISHED, pending=OUTBOX_PENDING,
                               failed=OUTBOX_FAILED)

    async def _on_conn(self, op: Callable[[asyncpg.Connection], Awaitable[T]],
                       timeout: float | None = None) -> T:
        """Runs ``op`` on the relay's connection, alone on it. A connection that fails, or does
        not answer within its command timeout (or ``timeout``, the wait for it included), is
        closed: the lead goes with it."""
        conn: asyncpg.Connection | None = None
        try:
            async with asyncio.timeout(timeout), self._conn_lock:
                conn = self._listen_conn
                if conn is None or conn.is_closed():
                    raise RelayConnectionLost("the relay has no connection")
                return await op(conn)
        except (OSError, TimeoutError) as exc:  # asyncpg's command timeout is a TimeoutError
            if conn is None:
                conn = self._listen_conn
            if conn is not None:
                conn.terminate()
            raise RelayConnectionLost("no answer in time" if isinstance(exc, TimeoutError)
                                      else f"{type(exc).__name__}: {exc}") from exc

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

    def _may_send(self) -> bool:
        """Whether a record may be handed to Kafka now: the lead is held, by this process's
        clock, on a connection that is still open."""
        conn = self._listen_conn
        return (self._leader and self._lost is None and self.lease.valid()
                and conn is not None and not conn.is_closed())

    def _epoch(self) -> int:
        epoch = self.lease.epoch
        if not self._leader or epoch is None:
            raise LeadLost("this relay does not hold the lead")
        return epoch

    async def _try_lead(self) -> None:
        took = await self._on_conn(self.lease.take)
        if took:
            self._progress_at = time.monotonic()
            self._failures = 0
            log.info("relay is the active publisher (epoch %s)", self.lease.epoch,
                     extra={"service": self.service})
        self._lead(took)

    def _lose(self, reason: str, detail: str) -> None:
        """The lead is lost (or given up): nothing more is sent under it, and the loop steps
        down at its next round (``_step_down``)."""
        if not self._leader:
            return  # lost already
        epoch = self.lease.forget()
        self._lost = (reason, detail)
        self._lead(False)
        self._wake.set()
        metrics.RELAY_LEAD_LOST.labels(self.service, reason).inc()
        log.warning("relay lost the lead (epoch %s, %s): %s", epoch, reason, detail,
                    extra={"service": self.service})

    async def _step_down(self) -> None:
        """After the lead was lost: the producer goes (sends it still held are the next
        leader's), and so do the acknowledgements not marked yet (their marks would be refused:
        the next leader publishes those rows again, a duplicate the inbox drops)."""
        self._lost = None
        await self.publisher.stop()
        self._acked.clear()

    async def _keep_lead(self, stop: asyncio.Event) -> None:
        """While this relay leads: renews the lease every quarter of it, as long as the loop
        finishes a round of publishing at least every ``relay_stall_s``; otherwise gives the
        lead up, for a standby that may reach Kafka. A renewal refused (another relay took
        the lead) or not made in time loses the lead."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.lease.renew_every_s)
            if stop.is_set() or not self._leader or self._lost is not None:
                continue
            try:
                await self._renew_or_resign()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("relay lease renewal failed", extra={"service": self.service})

    async def _renew_or_resign(self) -> None:
        stalled_s = time.monotonic() - self._progress_at
        if stalled_s > self.settings.relay_stall_s:
            await self._resign(f"no round of publishing finished for {stalled_s:.1f}s")
            return
        try:
            renewed: bool | None = await self._on_conn(self.lease.renew,
                                                       timeout=self.lease.remaining_s())
        except (RelayConnectionLost, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            renewed = None
            log.warning("relay lease not renewed: %r", exc, extra={"service": self.service})
        if renewed is False:
            self._lose("taken", "another relay holds the lease")
        elif renewed is None and not self.lease.valid():
            self._lose("expired", "the lease ran out before a renewal went through")

    async def _resign(self, detail: str) -> None:
        epoch = self.lease.epoch
        self._aside_until = time.monotonic() + ASIDE_POLLS * self.settings.relay_poll_interval_s
        self._lose("stalled", detail)
        if epoch is not None:
            with contextlib.suppress(RelayConnectionLost, asyncpg.PostgresError,
                                     asyncpg.InterfaceError):
                await self._on_conn(lambda conn: self.lease.release(conn, epoch),
                                    timeout=self.lease.renew_every_s)

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
        await self._on_conn(lambda conn: conn.execute(NOTIFY_LEADER, self.tables.notify_channel))
        metrics.RELAY_WAKEUPS_FORWARDED.labels(self.service).inc()

    async def _ensure_connection(self) -> None:
        if self._listen_conn is not None and not self._listen_conn.is_closed():
            return
        if self._leader:
            self._lose("connection", "the relay's connection closed")
        self._lead(False)
        # The pool's URL, TLS parameters included (sagakit.store.postgres_url).
        target = postgres_target(self.engine.url)
        async with self._conn_lock:
            try:
                conn = await asyncpg.connect(
                    target.dsn(), timeout=10,
                    # A statement that gets no answer within the lease is not waited for: the
                    # connection is closed and opened again.
                    command_timeout=self.settings.relay_lease_s,
                    **target.connect_args({**RELAY_SESSION,
                                           "application_name": self.application_name}))
            except (OSError, TimeoutError) as exc:
                raise RelayConnectionLost(f"{type(exc).__name__}: {exc}") from exc
            try:
                await conn.add_listener(self.tables.notify_channel, self._on_notify)
            except BaseException:
                conn.terminate()
                raise
            self._listen_conn = conn

    def _on_notify(self, *args: Any) -> None:
        """asyncpg's listener callback (connection, pid, channel, payload): rows were
        committed by a process whose own relay does not lead (passed on by its standby relay,
        or sent with the commit where no relay runs)."""
        if self._leader:  # a standby tries for the lead at its poll, not on every commit
            self._wake.set()

    async def _drop_connection(self) -> None:
        conn, self._listen_conn = self._listen_conn, None
        if self._leader:
            self._lose("connection", "the relay's connection failed")
        self._lead(False)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)

    # ------------------------------------------------------------------ publishing

    async def publish_batch(self) -> int:
        """Publishes the oldest pending rows, selected by a statement that also marks the rows
        acknowledged before. Returns how many were acknowledged (they are marked later: by the
        next select, or by a statement of their own, see ``_idle``). Only while this relay
        holds the lead (``lead``): ``LeadLost`` otherwise."""
        if not self._may_send():
            raise LeadLost("this relay does not hold the lead, or its lease ran out")
        if self.publisher.in_flight:
            # Sends an earlier batch gave up on are resolved first, so that this select marks
            # those Kafka acknowledged and selects again only those that failed.
            await self.publisher.settle()
        return await self.publisher.publish(await self._select())

    async def _select(self) -> list[OutboxRow]:
        """Marks the rows acknowledged so far and selects the oldest pending rows, both only
        while this relay's epoch is the lease's."""
        epoch = self._epoch()
        self._last_select = time.monotonic()
        ids, times = self._acked_columns()
        records = await self._on_conn(lambda conn: conn.fetch(
            self._mark_and_select, ids, times, self.settings.relay_batch_size, epoch))
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
            version = row.payload.get("schema_version") if isinstance(row.payload, dict) else None
            if isinstance(version, str):
                SCHEMA_USE.produced(self.service, row.event_type, version)
        metrics.RELAY_PUBLISHED.labels(self.service).inc(len(rows))
        self.published_total += len(rows)
        self._failures = 0
