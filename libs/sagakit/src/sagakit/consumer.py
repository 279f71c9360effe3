"""The consumer loop: decode, validate, deduplicate, handle, commit, then acknowledge.

For each record, in partition order:
1. Decode the envelope and validate its payload against its schema. Bytes that are not an
   envelope, an unknown event type or an invalid payload are dead-lettered at once.
2. Event types this service does not handle are acknowledged and skipped (their payload is
   not validated here: that is for the services that handle them).
3. In one unit of work: run the handler and commit, with the message id claimed in
   ``processed_messages`` in the same transaction (a duplicate is found there and rolled
   back). The offset is committed to Kafka only after that: offsets of the records handled
   meanwhile go in one request at most every ``consumer_offset_commit_interval_ms``, and
   before a rebalance takes partitions away (what a crash loses is redelivered and absorbed).
4. ``TransientError`` (and database serialisation failures, deadlocks, lock timeouts) are
   retried with exponential backoff and jitter. While a record waits for its retry, its
   partition is rewound to it and paused, so the other partitions keep flowing. When the
   attempts run out, and at once for a ``PermanentError`` or any other exception, the message
   goes to the service's dead-letter topic, written through the outbox together with an inbox
   row marking it dead-lettered, with every attempt's time and error (``sagakit.dead_letters``:
   what PostgreSQL cannot keep as text, a NUL byte, is parked as bytes; no record can hold its
   partition up for want of a letter).
5. An unreachable database is nobody's fault but the infrastructure's: the record is not
   dead-lettered; it is retried after a capped backoff for as long as it takes.
Partitions are handled concurrently, each in order, and stay in the fetch while busy.

When a partition's records queue up (the stack is busy), consecutive records whose handlers
allow it (``SHARES_TRANSACTION``) are handled in one transaction, each with its own unit of
work, inbox row and outbox rows, and one COMMIT for all (``SharedTransaction``): a commit
costs PostgreSQL more than the statement it ends. Each record keeps the guarantees above: a
record that fails in a shared transaction rolls all of it back, and the records up to it are
handled alone, so that its failure is judged, retried or dead-lettered by itself; offsets are
committed only after the shared COMMIT. A record never waits for others to arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError
from opentelemetry.trace import SpanKind
from saga_contracts import headers as h
from saga_contracts import registry
from saga_contracts.topics import dead_letter_topic

from sagakit import dead_letters, metrics, tracing
from sagakit.backoff import Backoff
from sagakit.conflicts import CONFLICT_SQLSTATES
from sagakit.context import current_message
from sagakit.dead_letters import Attempt, Original
from sagakit.envelope import Envelope, UndecodableMessage, decode_headers, utc_now_iso
from sagakit.errors import (
    CommitOutcomeUnknown,
    HandlerTimedOut,
    PermanentError,
    StaleRead,
    TransientError,
    is_connection_failure,
    sqlstate,
)
from sagakit.faults import DeliveryFaults, crash_now
from sagakit.kafka import manual_commit_consumer
from sagakit.settings import MessagingSettings
from sagakit.tables import INBOX_DEAD_LETTERED
from sagakit.unit_of_work import AlreadyProcessed, SharedTransaction, UnitOfWork

log = logging.getLogger("sagakit.consumer")

Handler = Callable[[UnitOfWork, Envelope], Awaitable[None]]

# SQLSTATEs worth another try: serialization_failure, deadlock_detected, lock_not_available,
# query_canceled (statement_timeout).
RETRYABLE_SQLSTATES = {"40001", "40P01", "55P03", "57014"}
# serialization_failure and deadlock_detected: retried at once a few times before they count
# as an attempt, because under contention they are expected and resolve immediately.
MAX_QUICK_RETRIES = 20
# What a handler may ask of its unit of work, as attributes of the handler function.
UOW_OPTIONS = ("isolation_level", "reads_outside_transaction")
# A handler with this attribute true may have its unit of work share a transaction with other
# records' when they queue up (``SharedTransaction``): it reads outside a transaction, writes
# only with its commit statement, and leaves what must follow the commit to ``after_commit``.
SHARES_TRANSACTION = "shares_transaction"


class InfrastructureDown(Exception):
    """The database is unreachable: retry the record later, never dead-letter it for that."""


class _BeforeRebalance(ConsumerRebalanceListener):
    """Runs ``then`` before partitions are shared out again (aiokafka awaits it)."""

    def __init__(self, then: Callable[[], Awaitable[None]]) -> None:
        self._then = then

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self._then()

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        return None


@dataclass
class Outcome:
    status: str  # processed | duplicate | skipped | dead_lettered | retry
    attempts: list[Attempt] = field(default_factory=list)
    event_type: str | None = None
    retry_in_s: float | None = None


def classify(exc: BaseException) -> str:
    """'infrastructure', 'transient' or 'permanent'."""
    if isinstance(exc, CommitOutcomeUnknown):
        return "infrastructure"  # redelivered once the database is back; the inbox decides
    if isinstance(exc, TransientError):
        return "transient"
    if isinstance(exc, PermanentError):
        return "permanent"
    if sqlstate(exc) in RETRYABLE_SQLSTATES:  # SQLAlchemy's error or asyncpg's own
        return "transient"
    if is_connection_failure(exc) or isinstance(exc, asyncio.TimeoutError):
        return "infrastructure"  # a driver's connect timeout: the database is down
    return "permanent"


def _check_fetcher_alive(consumer: AIOKafkaConsumer) -> None:
    """aiokafka's background fetch task can end on its own — uvloop raises RuntimeError, which
    it does not expect, when it writes to a connection the broker has just closed
    (aio-libs/aiokafka#1038, seen in ``make chaos``) — and getmany() then returns nothing,
    forever, without an error: a consumer that looks alive and consumes nothing. Raised as a
    KafkaError, it makes the loop replace the consumer with a new one."""
    task = getattr(getattr(consumer, "_fetcher", None), "error_future", None)
    if task is not None and task.done():
        detail = "cancelled" if task.cancelled() else repr(task.exception())
        raise KafkaError(f"aiokafka's fetch task ended ({detail}); restarting the consumer")


@dataclass(frozen=True)
class RetryLater:
    """A partition rewound to ``from_offset``, to be fetched again after ``delay_s``."""

    delay_s: float
    from_offset: int


@dataclass
class _Lane:
    """One partition's records fetched and not yet handled, and the task handling them."""

    next_offset: int
    records: list[Any] = field(default_factory=list)
    worker: asyncio.Task[None] | None = None
    full: bool = False


@dataclass(frozen=True)
class Admitted:
    """A record to handle: its envelope decoded and its payload valid."""

    envelope: Envelope
    handler: Handler
    shares: bool
    """Its handler may share a transaction with other records' (``SHARES_TRANSACTION``)."""
    traceparent: str | None


@dataclass(frozen=True)
class Rejected:
    """A record to dead-letter at once, and why."""

    envelope: Envelope | None
    reason: str
    error: BaseException
    detail: str


Verdict = Admitted | Rejected | Outcome


@dataclass
class RawRecord:
    """What the loop needs of a Kafka record; tests build these to drive ``process`` directly."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp: int = 0


def _identity(raw: RawRecord, envelope: Envelope | None) -> tuple[str, str, str | None]:
    """The message id, event type and saga id a dead letter of ``raw`` is recorded under (its
    inbox row): the envelope's, else its headers', else where the record sits. Only text that
    PostgreSQL keeps: a header with a NUL in it names nothing."""
    if envelope is not None:
        return (envelope.message_id, dead_letters.scrubbed(envelope.event_type),
                envelope.saga_id)
    hdrs = {k: v for k, v in decode_headers(raw.headers).items() if dead_letters.storable(v)}
    return (hdrs.get(h.MESSAGE_ID) or f"kafka:{raw.topic}:{raw.partition}:{raw.offset}",
            hdrs.get(h.EVENT_TYPE) or "undecodable", hdrs.get(h.SAGA_ID) or None)


class EventConsumer:
    def __init__(self, *, service: str, topics: list[str], handlers: dict[str, Handler],
                 uow_factory: Callable[..., UnitOfWork], settings: MessagingSettings,
                 on_event: Callable[[str, Envelope, float], None] | None = None,
                 shared_transaction: Callable[[], SharedTransaction] | None = None) -> None:
        self.service = service
        self.topics = topics
        self.handlers = handlers
        self.uow_factory = uow_factory
        self.shared_transaction = shared_transaction
        self._sharing = {event_type for event_type, handler in handlers.items()
                         if getattr(handler, SHARES_TRANSACTION, False)}
        # Sagas touched by an open shared transaction (resolved when it ends), and those of
        # them another lane waits for (``_handle_together``).
        self._held: dict[str, asyncio.Future[None]] = {}
        self._wanted: set[str] = set()
        for event_type in self._sharing:
            handler = handlers[event_type]
            if (getattr(handler, "isolation_level", None)
                    or not getattr(handler, "reads_outside_transaction", False)):
                raise ValueError(f"the {event_type} handler cannot share a transaction: only "
                                 "one that reads outside a transaction can")
        self.settings = settings
        self.dlq_topic = dead_letter_topic(service)
        self.retry_backoff = Backoff(settings.retry_initial_backoff_s,
                                     settings.retry_backoff_factor,
                                     settings.retry_max_backoff_s, settings.retry_jitter)
        self.infra_backoff = Backoff(0.2, 2.0, 5.0)
        self._on_event = on_event
        self._consumer: AIOKafkaConsumer | None = None
        self._retrying: dict[tuple[TopicPartition, int], list[Attempt]] = {}
        self._offsets: dict[TopicPartition, int] = {}
        self._offsets_ready = asyncio.Event()
        self._lanes: dict[TopicPartition, _Lane] = {}
        # The group's committed offsets as far as this instance knows them (for the lag gauge).
        self._committed: dict[TopicPartition, int] = {}
        self._lag_assignment: set[TopicPartition] = set()
        self.delivery_faults = DeliveryFaults(settings.fault_duplicate_delivery,
                                              settings.fault_late_redelivery,
                                              settings.fault_reorder_delivery)
        self._late: dict[TopicPartition, list[RawRecord]] = {}
        self._crashed: BaseException | None = None
        self._restarts = 0
        self.assigned = asyncio.Event()

    # ------------------------------------------------------------------ Kafka loop

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._crashed = None
            consumer = manual_commit_consumer(self.settings.kafka_bootstrap_servers,
                                              self.service, self.topics,
                                              f"{self.service}-consumer",
                                              self.settings.consumer_fetch_max_wait_ms,
                                              _BeforeRebalance(self._commit_before_rebalance))
            try:
                await consumer.start()
                self._consumer = consumer
                await self._loop(consumer, stop)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Kafka gone, or anything else that broke this consumer (aiokafka's background
                # tasks can die of errors it does not expect, aio-libs/aiokafka#1038): a new
                # consumer after a backoff; what was not committed is fetched again.
                self._restarts += 1
                delay = self.infra_backoff.delay(self._restarts)
                if isinstance(exc, KafkaError | OSError):
                    log.warning("consumer lost Kafka, reconnecting in %.2fs: %r", delay, exc,
                                extra={"service": self.service})
                else:
                    log.error("consumer failed, restarting it in %.2fs", delay, exc_info=exc,
                              extra={"service": self.service})
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            finally:
                self._consumer = None
                self.assigned.clear()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(consumer.stop(), 10)

    async def _commit_offsets(self, consumer: AIOKafkaConsumer) -> None:
        if not self._offsets:
            return
        offsets, self._offsets = self._offsets, {}
        assigned = consumer.assignment()
        mine = {tp: o for tp, o in offsets.items() if tp in assigned}
        try:
            await consumer.commit(mine)
            self._committed.update(mine)
        except KafkaError:
            # Keep them for the next try, unless newer offsets were recorded meanwhile.
            for tp, o in offsets.items():
                self._offsets.setdefault(tp, o)
            raise

    async def _commit_before_rebalance(self) -> None:
        """Offsets go to Kafka only every ``consumer_offset_commit_interval_ms``: the instance
        that gets a partition would otherwise handle again what this one handled since (the
        inbox would absorb it, at the cost of a transaction a record)."""
        if self._consumer is None:
            return
        try:
            await self._commit_offsets(self._consumer)
        except KafkaError as exc:
            log.warning("offsets not sent before a rebalance: %r", exc,
                        extra={"service": self.service})

    async def _committer(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._offsets_ready.wait()
            self._offsets_ready.clear()
            # Records handled meanwhile share the commit.
            await asyncio.sleep(self.settings.consumer_offset_commit_interval_ms / 1000)
            try:
                await self._commit_offsets(consumer)
            except KafkaError as exc:
                log.warning("offset commit failed, will retry: %r", exc,
                            extra={"service": self.service})
                self._offsets_ready.set()

    async def _loop(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        committer = asyncio.create_task(self._committer(consumer, stop))
        try:
            await self._fetch_loop(consumer, stop)
        finally:
            committer.cancel()
            workers = [lane.worker for lane in self._lanes.values() if lane.worker]
            for task in workers:
                task.cancel()
            await asyncio.gather(committer, *workers, return_exceptions=True)
            self._lanes.clear()
            with contextlib.suppress(KafkaError):
                await self._commit_offsets(consumer)

    async def _fetch_loop(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        # Each partition's records go to a lane of their own, handled in order by a task of
        # their own, so a slow partition (a database answering in seconds, a dead letter being
        # written) never holds up the others. A partition stays in the fetch while its lane is
        # busy: its next records arrive as soon as they are produced instead of waiting out a
        # fetch already in flight without it (up to the fetch wait). It is paused only while
        # its lane is full (backpressure) or while a record waits for its retry.
        while not stop.is_set():
            if self._crashed is not None:
                raise self._crashed
            batch = await consumer.getmany(timeout_ms=1000,
                                           max_records=self.settings.consumer_max_records)
            _check_fetcher_alive(consumer)
            if consumer.assignment():
                self.assigned.set()
                self._restarts = 0  # the backoff grows only while restarts keep failing
            for tp, records in batch.items():
                self._enqueue(consumer, tp, records)

    def _enqueue(self, consumer: AIOKafkaConsumer, tp: TopicPartition, records: list[Any]) -> None:
        lane = self._lanes.get(tp)
        if lane is None:
            lane = self._lanes[tp] = _Lane(next_offset=records[0].offset)
        # Records already in the lane (or done by it) come again when the partition was revoked
        # and assigned back meanwhile: fetched from the committed offset, which lags the lane.
        fresh = [r for r in records if r.offset >= lane.next_offset]
        if not fresh:
            return
        lane.records.extend(fresh)
        lane.next_offset = fresh[-1].offset + 1
        if len(lane.records) >= self.settings.consumer_max_records and not lane.full:
            lane.full = True
            self._pause(consumer, tp)
        if lane.worker is None:
            lane.worker = asyncio.create_task(self._drain(consumer, tp, lane))
            lane.worker.add_done_callback(functools.partial(self._lane_done, tp, lane))

    async def _drain(self, consumer: AIOKafkaConsumer, tp: TopicPartition, lane: _Lane) -> None:
        try:
            while lane.records:
                batch, lane.records = lane.records, []
                if lane.full:
                    lane.full = False
                    self._resume(consumer, tp)
                retry = await self._partition(consumer, tp, batch)
                if retry is not None:
                    # The partition was rewound to the record to retry: whatever the lane
                    # holds after it comes again from Kafka once the backoff is over.
                    lane.records.clear()
                    lane.next_offset = retry.from_offset
                    lane.full = False
                    self._pause(consumer, tp)
                    asyncio.get_running_loop().call_later(retry.delay_s, self._resume,
                                                          consumer, tp)
                    return
        finally:
            # In the same step as the last look at the lane: records enqueued from now on start
            # a new worker. (Left to the done callback, which runs a loop iteration later,
            # records enqueued in between would wait for the partition's next record.)
            lane.worker = None

    def _lane_done(self, tp: TopicPartition, lane: _Lane, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._crashed = exc  # raised by the fetch loop: the consumer restarts cleanly

    async def _partition(self, consumer: AIOKafkaConsumer, tp: TopicPartition,
                         records: list[Any]) -> RetryLater | None:
        """Handles the records in order. Consecutive records whose handlers may share a
        transaction are handled in one (``_handle_run``). When it stops at a record waiting
        for a retry, it rewinds the partition to the first record not done and says when to
        fetch again."""
        faults = self.delivery_faults
        batch = [RawRecord(r.topic, r.partition, r.offset, r.key, r.value,
                           list(r.headers or []), r.timestamp) for r in records]
        if faults.active:
            await self._deliver_late(tp)
            batch = faults.shuffle(batch)
        completed: set[int] = set()
        run: list[tuple[RawRecord, Admitted]] = []
        try:
            for raw in batch:
                verdict = self.admit(raw)
                if isinstance(verdict, Outcome):
                    # Nothing to write and nothing to wait for: it does not end a run.
                    await self._settle(tp, raw, self._skipped(verdict), completed)
                    continue
                shares = self._may_share(tp, raw, verdict)
                if shares:
                    assert isinstance(verdict, Admitted)
                    run.append((raw, verdict))
                if run and (not shares or len(run) >= self.settings.consumer_batch_max):
                    waiting = await self._handle_run(tp, run, completed)
                    run = []
                    if waiting is not None:
                        return self._retry_later(consumer, tp, batch, completed, *waiting)
                if shares:
                    continue
                self._ask_for(verdict)
                outcome = await self._process_until_decided(tp, raw, verdict)
                if outcome.status == "retry":
                    return self._retry_later(consumer, tp, batch, completed, raw, outcome)
                await self._settle(tp, raw, outcome, completed)
            if run:
                waiting = await self._handle_run(tp, run, completed)
                if waiting is not None:
                    return self._retry_later(consumer, tp, batch, completed, *waiting)
            return None
        finally:
            # Only after the local transaction committed (or the record was dead-lettered),
            # and only up to the first record not done. The committer sends it to Kafka within
            # ``consumer_offset_commit_interval_ms``: a crash before then redelivers the records
            # handled since, which the inbox absorbs.
            next_offset = None
            for raw in sorted(batch, key=lambda r: r.offset):
                if raw.offset not in completed:
                    break
                next_offset = raw.offset + 1
            if next_offset is not None:
                self._offsets[tp] = next_offset
                self._offsets_ready.set()

    def _retry_later(self, consumer: AIOKafkaConsumer, tp: TopicPartition,
                     batch: list[RawRecord], completed: set[int], raw: RawRecord,
                     outcome: Outcome) -> RetryLater:
        # Wait without holding the loop: rewind this partition to its first record not done,
        # keep it paused, and let the other partitions go on meanwhile.
        self._retrying[(tp, raw.offset)] = outcome.attempts
        rewind = min(r.offset for r in batch if r.offset not in completed)
        self._rewind(consumer, tp, rewind)
        return RetryLater(outcome.retry_in_s or 0.0, rewind)

    async def _settle(self, tp: TopicPartition, raw: RawRecord, outcome: Outcome,
                      completed: set[int]) -> None:
        """What follows a record's outcome: its offset may be committed (and the fault
        injection of the crash and chaos tests gets its turn)."""
        if (self.settings.crash_after_commit and outcome.status == "processed"
                and outcome.event_type == self.settings.crash_after_commit):
            crash_now("consumer: after commit, before offset commit", outcome.event_type)
        completed.add(raw.offset)
        faults = self.delivery_faults
        if faults.active and outcome.status != "skipped":
            if faults.again_now():
                await self._process_until_decided(tp, raw)
            if faults.again_later():
                self._late.setdefault(tp, []).append(raw)

    # ------------------------------------------------------------------ records together

    def _may_share(self, tp: TopicPartition, raw: RawRecord, verdict: Verdict) -> bool:
        return (self.shared_transaction is not None and self.settings.consumer_batch_max > 1
                and isinstance(verdict, Admitted) and verdict.shares
                and (tp, raw.offset) not in self._retrying)

    async def _handle_run(self, tp: TopicPartition, run: list[tuple[RawRecord, Admitted]],
                          completed: set[int]) -> tuple[RawRecord, Outcome] | None:
        """Handles consecutive records that may share a transaction: as many as possible in
        one, the others alone. A record whose guard found its state moved ends the shared
        transaction (the records before it commit) and is handled alone, as is a record that
        failed in it (all of it rolled back, the records before it alone too; after a
        duplicate, the whole run): its own unit of work decides what its failure means
        (duplicate, retry, dead letter). Returns the record that waits for a retry, if one
        does."""
        i = 0
        while i < len(run):
            done, alone = (await self._handle_together(run[i:]) if len(run) - i > 1
                           else (0, 1))
            for raw, verdict in run[i:i + done]:
                await self._settle(tp, raw, Outcome("processed", [], verdict.envelope.event_type),
                                   completed)
            i += done
            for raw, verdict in run[i:i + alone]:
                self._ask_for(verdict)
                outcome = await self._process_until_decided(tp, raw, verdict)
                if outcome.status == "retry":
                    return raw, outcome
                await self._settle(tp, raw, outcome, completed)
            i += alone
        return None

    async def _handle_together(self, run: list[tuple[RawRecord, Admitted]]) -> tuple[int, int]:
        """Handles ``run`` in one shared transaction; returns how many records of it, from the
        first, it committed, and how many after those must be handled alone.

        Lanes of this process coordinate by saga (the key of every lock a saga step takes):
        a shared transaction records the sagas it has touched until it ends. A record whose saga
        another lane's open shared transaction holds is not handled in this one: this one
        commits what it has (releasing its own locks), and the next one begins by waiting for
        the other to end; meanwhile the other is asked to commit after its current record.
        Two lanes never wait for each other's locks, and no lane waits for the lock timeout.
        (Across processes, the lock timeout still stands.)"""
        assert self.shared_transaction is not None
        started = time.perf_counter()
        handled = 0
        mine: set[str] = set()
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(self.settings.handler_timeout_s):
                async with self.shared_transaction() as shared:
                    stale = False
                    for _, verdict in run:
                        saga = verdict.envelope.saga_id
                        if saga not in mine:
                            if saga in self._held:
                                if handled:
                                    self._wanted.add(saga)
                                    break  # commit now; the next transaction waits for it
                                await self._wait_until_released(saga)
                            self._held[saga] = ended
                            mine.add(saga)
                        if not await self._handle_shared(shared, verdict):
                            stale = True  # its guard found its state moved: it goes alone
                            break
                        handled += 1
                        if self._wanted & mine:
                            break  # another lane waits for a saga of this one
                    if handled == 0:
                        return 0, 1
                    await shared.commit()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metrics.SHARED_TRANSACTIONS.labels(self.service, "rolled_back").inc()
            log.info("shared transaction of %s records rolled back (%s), handling them alone",
                     len(run), type(exc).__name__, extra={"service": self.service})
            if isinstance(exc, AlreadyProcessed):
                # Redelivered records (after a crash, a rebalance) come in runs: the ones after
                # a duplicate are most likely duplicates too, each of which would roll back
                # another shared transaction.
                return 0, len(run)
            # Which record failed, if it was one of them and not the COMMIT: those before it
            # worked and the ones after it may well work together again.
            return 0, min(handled + 1, len(run))
        finally:
            for saga in mine:
                if self._held.get(saga) is ended:
                    del self._held[saga]
                self._wanted.discard(saga)
            ended.set_result(None)
        metrics.SHARED_TRANSACTIONS.labels(self.service, "committed").inc()
        metrics.SHARED_TRANSACTION_RECORDS.labels(self.service).observe(handled)
        elapsed = time.perf_counter() - started
        for _, verdict in run[:handled]:
            self._report(verdict.envelope, "processed", elapsed, 1)
        return handled, 1 if stale else 0

    def _ask_for(self, verdict: Verdict) -> None:
        """A record about to be handled alone: if another lane's shared transaction holds its
        saga, that one commits after its current record instead of making it wait longer."""
        if isinstance(verdict, Admitted) and verdict.envelope.saga_id in self._held:
            self._wanted.add(verdict.envelope.saga_id)

    async def _wait_until_released(self, saga: str) -> None:
        """Until no other lane's shared transaction holds ``saga``, asking it to commit."""
        while (holder := self._held.get(saga)) is not None:
            self._wanted.add(saga)
            await asyncio.shield(holder)

    async def _handle_shared(self, shared: SharedTransaction, verdict: Admitted) -> bool:
        envelope = verdict.envelope
        token = current_message.set(envelope)
        try:
            with self._span(envelope, verdict.traceparent):
                async with shared.unit() as uow:
                    uow.claim(envelope.message_id, envelope.event_type, envelope.saga_id)
                    await verdict.handler(uow, envelope)
                    if not uow.ended:
                        await uow.commit()
                    return uow.committed
        finally:
            current_message.reset(token)

    async def _process_until_decided(self, tp: TopicPartition, raw: RawRecord,
                                     verdict: Verdict | None = None) -> Outcome:
        """One record, waiting out an unreachable database (never a reason to dead-letter)."""
        failures = 0
        while True:
            try:
                prior = self._retrying.pop((tp, raw.offset), None)
                return await self.process(raw, prior, verdict)
            except InfrastructureDown as exc:
                failures += 1
                delay = self.infra_backoff.delay(failures)
                log.warning("database unreachable, retrying record in %.2fs: %r",
                            delay, exc.__cause__ or exc,
                            extra={"service": self.service, "attempt": failures})
                await asyncio.sleep(delay)

    async def _deliver_late(self, tp: TopicPartition) -> None:
        """Records held back by the late-redelivery fault, handed over again after newer ones."""
        for raw in self._late.pop(tp, []):
            outcome = await self._process_until_decided(tp, raw)
            log.warning("fault injection: late redelivery of %s at offset %s: %s",
                        outcome.event_type, raw.offset, outcome.status,
                        extra={"service": self.service})

    # A partition revoked while its lane was busy has nothing left to pause or rewind here:
    # its next owner starts from the committed offset, never past the first record not done.
    # (Raising would restart the consumer, and with it a rebalance of the whole group.)
    @staticmethod
    def _pause(consumer: AIOKafkaConsumer, tp: TopicPartition) -> None:
        with contextlib.suppress(IllegalStateError):
            consumer.pause(tp)

    @staticmethod
    def _rewind(consumer: AIOKafkaConsumer, tp: TopicPartition, offset: int) -> None:
        with contextlib.suppress(IllegalStateError):
            consumer.seek(tp, offset)

    @staticmethod
    def _resume(consumer: AIOKafkaConsumer, tp: TopicPartition) -> None:
        with contextlib.suppress(Exception):  # revoked meanwhile: nothing to resume
            consumer.resume(tp)

    # ------------------------------------------------------------------ one record

    def admit(self, raw: RawRecord) -> Verdict:
        """What a record is before anything is written for it: a record to handle (its
        envelope decoded, its payload valid), one to skip, or one to dead-letter and why."""
        headers = decode_headers(raw.headers)
        replay_for = headers.get(h.REPLAY_FOR)
        if replay_for and replay_for != self.service:
            # A dead letter replayed for another consumer: this service processed the original.
            return Outcome("skipped")
        try:
            envelope = Envelope.from_record_value(raw.value)
        except UndecodableMessage as exc:
            return Rejected(None, "undecodable", exc, repr(exc))
        event_type = envelope.event_type
        handler = self.handlers.get(event_type)
        try:
            if handler is None:
                # Unknown to the catalogue is a dead letter for every reader; the payload of an
                # event this service does not handle is its handlers' business, and validating
                # it here (most records on a topic are such events) is CPU for nothing.
                registry.schema_for(event_type, envelope.schema_version)
            else:
                registry.validate(event_type, envelope.schema_version, envelope.payload)
        except registry.UnknownEventType as exc:
            return Rejected(envelope, "unknown_event_type", exc, repr(exc))
        except registry.SchemaViolation as exc:
            return Rejected(envelope, "schema_invalid", exc, str(exc))
        if handler is None:
            return Outcome("skipped", event_type=event_type)
        return Admitted(envelope, handler, event_type in self._sharing,
                        headers.get(h.TRACEPARENT))

    def _skipped(self, outcome: Outcome) -> Outcome:
        if outcome.event_type is not None:
            metrics.MESSAGES_CONSUMED.labels(self.service, outcome.event_type, "skipped").inc()
        return outcome

    async def process(self, raw: RawRecord, prior_attempts: list[Attempt] | None = None,
                      verdict: Verdict | None = None) -> Outcome:
        """Handles one record once, alone. A transient failure with attempts left returns a
        ``retry`` outcome with the backoff to wait; the caller redelivers the record with the
        attempts so far (``prior_attempts``). ``verdict``: the record's ``admit``, if known."""
        started = time.perf_counter()
        verdict = verdict or self.admit(raw)
        if isinstance(verdict, Outcome):
            return self._skipped(verdict)
        if isinstance(verdict, Rejected):
            return await self._dead_letter(raw, verdict.envelope, verdict.reason, verdict.error,
                                           [Attempt(1, utc_now_iso(), verdict.detail)])
        envelope, handler = verdict.envelope, verdict.handler
        event_type = envelope.event_type

        token = current_message.set(envelope)
        attempts: list[Attempt] = list(prior_attempts or [])
        conflicts = 0
        try:
            while True:
                number = len(attempts) + 1
                try:
                    status = await self._handle_within_timeout(
                        handler, envelope, verdict.traceparent)
                    self._report(envelope, status, time.perf_counter() - started, number)
                    return Outcome(status, attempts, event_type)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    kind = classify(exc)
                    if kind == "infrastructure":
                        raise InfrastructureDown(str(exc)) from exc
                    if sqlstate(exc) in CONFLICT_SQLSTATES and conflicts < MAX_QUICK_RETRIES:
                        # Lost a race for a row lock under REPEATABLE READ: the other
                        # transaction has just committed, so try again at once.
                        conflicts += 1
                        await asyncio.sleep(random.uniform(0, 0.005 * conflicts))
                        continue
                    attempts.append(Attempt(number, utc_now_iso(), repr(exc)[:2000]))
                    metrics.STEP_ERRORS.labels(self.service, event_type, kind).inc()
                    if kind == "permanent" or number >= self.settings.retry_max_attempts:
                        reason = "permanent" if kind == "permanent" else "retries_exhausted"
                        return await self._dead_letter(raw, envelope, reason, exc, attempts)
                    delay = self.retry_backoff.delay(number)
                    log.warning("transient failure, retrying in %.2fs: %r", delay, exc,
                                extra={"service": self.service, "saga_id": envelope.saga_id,
                                       "event_type": event_type, "status": "FAILED",
                                       "attempt": number,
                                       "schema_version": envelope.schema_version,
                                       "span_id": envelope.span_id,
                                       "parent_span_id": envelope.parent_span_id})
                    return Outcome("retry", attempts, event_type, delay)
        finally:
            current_message.reset(token)

    def _report(self, envelope: Envelope, status: str, elapsed: float, attempt: int) -> None:
        event_type = envelope.event_type
        metrics.HANDLER_DURATION.labels(self.service, event_type).observe(elapsed)
        metrics.MESSAGES_CONSUMED.labels(self.service, event_type, status).inc()
        if self._on_event:
            self._on_event(status, envelope, elapsed)
        log.info("event %s", "duplicate ignored" if status == "duplicate" else "processed",
                 extra={"service": self.service, "saga_id": envelope.saga_id,
                        "event_type": event_type, "status": "SUCCESS",
                        "duration_ms": round(elapsed * 1000, 2), "attempt": attempt,
                        "message_id": envelope.message_id,
                        "schema_version": envelope.schema_version,
                        "span_id": envelope.span_id,
                        "parent_span_id": envelope.parent_span_id,
                        "duplicate": status == "duplicate"})

    async def _handle_within_timeout(self, handler: Handler, envelope: Envelope,
                                     traceparent: str | None) -> str:
        limit = self.settings.handler_timeout_s
        try:
            async with asyncio.timeout(limit) as deadline:
                return await self._handle_once(handler, envelope, traceparent)
        except TimeoutError as exc:
            if deadline.expired():
                # Ours, not a driver's connect timeout (that one means the database is down).
                raise HandlerTimedOut(f"{envelope.event_type} handler ran past {limit}s") from exc
            raise

    def _span(self, envelope: Envelope, traceparent: str | None) -> Any:
        return tracing.span(
            f"{envelope.event_type} process", traceparent=traceparent, kind=SpanKind.CONSUMER,
            attributes=tracing.attributes(id=envelope.saga_id, event_type=envelope.event_type,
                                          message_id=envelope.message_id,
                                          service=self.service))

    async def _handle_once(self, handler: Handler, envelope: Envelope,
                           traceparent: str | None = None) -> str:
        # A handler may ask for a stronger isolation level (inventario's allocation does), or
        # to read outside a transaction and write with its commit statement alone.
        options = {name: getattr(handler, name) for name in UOW_OPTIONS if hasattr(handler, name)}
        uow = self.uow_factory(**options)
        with self._span(envelope, traceparent) as span:
            try:
                async with uow:
                    uow.claim(envelope.message_id, envelope.event_type, envelope.saga_id)
                    await handler(uow, envelope)
                    if not uow.ended:
                        await uow.commit()
                    if not uow.committed:
                        # The handler's guarded write found the state it decided on gone.
                        raise StaleRead(f"{envelope.event_type}: what the handler read "
                                        "changed before its write; nothing was written")
            except AlreadyProcessed:
                span.set_attribute("saga.duplicate", True)
                return "duplicate"
            except Exception as exc:
                # A duplicate runs the handler before its claim is checked (at commit), and
                # the state it finds is the one its first delivery left: a handler may well
                # refuse it. Then it is a duplicate, not a failure to retry or dead-letter.
                # (A lost race is retried at once, and a lost database cannot answer: the
                # retry's claim settles those.)
                if (sqlstate(exc) not in CONFLICT_SQLSTATES and not is_connection_failure(exc)
                        and await self._processed_before(envelope.message_id)):
                    span.set_attribute("saga.duplicate", True)
                    return "duplicate"
                raise
        return "processed"

    async def _processed_before(self, message_id: str) -> bool:
        with contextlib.suppress(Exception):  # cannot tell: the original error stands
            async with self.uow_factory() as uow:
                return await uow.was_processed(message_id)
        return False

    # ------------------------------------------------------------------ dead letters

    async def _dead_letter(self, raw: RawRecord, envelope: Envelope | None, reason: str,
                           exc: BaseException, attempts: list[Attempt]) -> Outcome:
        message_id, event_type, saga_id = _identity(raw, envelope)
        original = Original(raw.topic, raw.value, message_id, event_type, raw.key, raw.headers,
                            raw.partition, raw.offset, raw.timestamp)
        trace = "".join(traceback.format_exception(exc))
        for as_bytes in (False, True):
            letter = dead_letters.build(service=self.service, reason=reason,
                                        error_class=type(exc).__name__, attempts=attempts,
                                        last_traceback=trace, original=original,
                                        saga_id=saga_id, as_bytes=as_bytes)
            try:
                async with self.uow_factory() as uow:
                    uow.claim(message_id, event_type, saga_id, status=INBOX_DEAD_LETTERED)
                    letter.emit(uow)
                    await uow.commit()
                break
            except AlreadyProcessed:
                return Outcome("duplicate", attempts)
            except Exception as db_exc:
                if classify(db_exc) in ("infrastructure", "transient"):
                    raise InfrastructureDown(str(db_exc)) from db_exc
                if as_bytes:
                    # Of the record, the letter now holds bytes in base64 and nothing else: the
                    # database refuses it for what it is (a table, a permission), not for this
                    # record, and would refuse any other. Waited out like a database that is
                    # away, the lane goes on once that is fixed; raised, it would restart the
                    # consumer onto the same record, for ever.
                    raise InfrastructureDown(f"no dead letter can be written: {db_exc!r}"
                                             ) from db_exc
                # Something of the record the database would not take as text: parked as
                # bytes instead, so that no record can hold its partition up.
                log.warning("dead letter refused, parking the record as bytes: %r", db_exc,
                            extra={"service": self.service, "event_type": event_type,
                                   "message_id": message_id})
        metrics.MESSAGES_CONSUMED.labels(self.service, event_type, "dead_lettered").inc()
        log.error("message dead-lettered (%s): %s", reason, exc,
                  extra={"service": self.service, "saga_id": saga_id, "event_type": event_type,
                         "status": "FAILED", "attempt": len(attempts),
                         "message_id": message_id, "dlq_topic": self.dlq_topic,
                         "schema_version": envelope.schema_version if envelope else None,
                         "span_id": envelope.span_id if envelope else None,
                         "parent_span_id": envelope.parent_span_id if envelope else None})
        return Outcome("dead_lettered", attempts)

    # ------------------------------------------------------------------ lag

    async def refresh_lag(self) -> None:
        """Lag per partition: log end minus the committed offset. The committed offsets are this
        instance's own commits, asked of Kafka only for partitions new to it (one request per
        partition), so the gauge costs one request every few seconds, not one per partition."""
        consumer = self._consumer
        if consumer is None:
            return
        assignment = set(consumer.assignment())
        if not assignment:
            return
        if assignment != self._lag_assignment:
            # A rebalance: another instance may have committed these partitions meanwhile.
            self._committed = {tp: o for tp, o in self._committed.items()
                               if tp in assignment and tp in self._lag_assignment}
            self._lag_assignment = assignment
        with contextlib.suppress(Exception):
            for tp in assignment - self._committed.keys():
                self._committed[tp] = await consumer.committed(tp) or 0
            ends = await consumer.end_offsets(list(assignment))
            for tp in assignment:
                metrics.CONSUMER_LAG.labels(self.service, tp.topic, str(tp.partition)).set(
                    max(0, ends.get(tp, 0) - self._committed.get(tp, 0)))
