"""Sends outbox rows to Kafka and waits for the acknowledgements; a row Kafka refuses for itself
is counted, and given up on when it can never be published, without holding up other sagas.

The relay (``sagakit.outbox.relay``) selects the rows and hands each batch over; what Kafka
acknowledged goes back to it (``acked``), to be marked published.

Each record is handed to the producer only while the relay holds the lead (``may_send``:
sagakit.outbox.leadership); a batch during which the lead is lost sends none of the rest.
A batch that gives up (no acknowledgement within ``relay_publish_timeout_s``, or a failure) does
not take its records back: they stay in the producer, which (idempotent) retries them until the
broker answers. Their sends are kept ``in_flight`` and resolved before anything new is sent
(``settle``), so a row is never sent again while the producer may still deliver it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

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
from sqlalchemy import exists, update
from sqlalchemy.ext.asyncio import AsyncEngine

from saga_contracts import headers as h
from sagakit import jsonio
from sagakit.kafka import durable_producer
from sagakit.observability import metrics, tracing
from sagakit.outbox.leadership import LEASE_NAME, LeadLost
from sagakit.outbox.statements import OutboxRow
from sagakit.settings import MessagingSettings
from sagakit.store.tables import OUTBOX_FAILED, OUTBOX_PENDING, MessagingTables

log = logging.getLogger("sagakit.relay")

# Errors that say "the broker is not there right now", not "this row is bad".
BROKER_UNAVAILABLE = (KafkaConnectionError, KafkaTimeoutError, asyncio.TimeoutError, OSError)
# Errors with which Kafka refuses one record for what it is (its size, its topic), whether
# ``send`` raises them at once or the acknowledgement carries them: that row is the one to
# count and give up on, never a reason to hold up the rows of other sagas.
ROW_REFUSED = (MessageSizeTooLargeError, RecordListTooLargeError, UnknownTopicOrPartitionError,
               TopicAuthorizationFailedError, InvalidTopicError)


class Publisher:
    """Publishes batches of outbox rows through one producer, started for the first batch."""

    def __init__(self, engine: AsyncEngine, tables: MessagingTables, service: str,
                 settings: MessagingSettings, acked: Callable[[list[OutboxRow]], None], *,
                 may_send: Callable[[], bool], epoch: Callable[[], int | None]) -> None:
        self.engine = engine
        self.tables = tables
        self.service = service
        self.settings = settings
        self._acked = acked
        self._may_send = may_send
        """Whether the relay holds the lead now: asked before each record is handed over."""
        self._epoch = epoch
        """The relay's epoch of the lead (sagakit.outbox.leadership), which a row's failure is
        written under."""
        self.producer: Any = None
        """The Kafka producer, started for the first batch that needs it."""
        self.in_flight: list[tuple[OutboxRow, asyncio.Future[Any]]] = []
        """Sends a batch gave up on that the producer has neither acknowledged nor failed yet."""

    async def start(self) -> Any:
        if self.producer is None:
            producer = durable_producer(self.settings, f"{self.service}-relay")
            try:
                await asyncio.wait_for(producer.start(), self.settings.relay_publish_timeout_s)
            except BaseException:
                with contextlib.suppress(Exception):
                    await producer.stop()
                raise
            self.producer = producer
        return self.producer

    async def stop(self) -> None:
        """Stops the producer, which flushes what it holds (5 s at most); sends in flight that
        it acknowledged meanwhile go to ``acked``. The others are forgotten: failed, or still
        held by a producer that did not stop in time, they are the next leader's to send."""
        producer, self.producer = self.producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), 5)
        in_flight, self.in_flight = self.in_flight, []
        acked = [row for row, fut in in_flight if _acknowledged(fut)]
        for _, fut in in_flight:
            fut.add_done_callback(_ignore_outcome)
        if acked:
            self._acked(acked)

    async def after_broker_failure(self) -> None:
        """A new producer for the next batch, unless sends are in flight: only this producer
        can still deliver them or say they failed, while a new one would send the same rows
        again (under another producer id, so the broker could not drop the copies)."""
        if not self.in_flight:
            await self.stop()

    async def settle(self) -> None:
        """Waits, ``relay_publish_timeout_s`` at most, for the sends left ``in_flight``: those
        acknowledged go to ``acked`` (to be marked, never sent again), those that failed are
        left to the next select to send again. Raises ``KafkaTimeoutError`` while any is still
        unanswered: nothing new may be sent before, or a later row of a saga could reach the
        topic before an earlier one that fails and is sent again."""
        in_flight = self.in_flight
        if not in_flight:
            return
        await asyncio.wait([fut for _, fut in in_flight],
                           timeout=self.settings.relay_publish_timeout_s)
        self.in_flight = [(row, fut) for row, fut in in_flight if not fut.done()]
        acked = [row for row, fut in in_flight if _acknowledged(fut)]
        if acked:
            self._acked(acked)
        if self.in_flight:
            raise KafkaTimeoutError(
                f"{len(self.in_flight)} sends of an earlier batch still unacknowledged after "
                f"{self.settings.relay_publish_timeout_s}s")

    async def publish(self, rows: list[OutboxRow]) -> int:
        """Sends the rows in order and waits for Kafka's acknowledgements. A row Kafka refuses
        for itself (``ROW_REFUSED``, whether ``send`` raises it or the acknowledgement carries
        it) is counted and, when it can never be published, given up on (``_refuse``); the
        later rows of its saga wait behind it and every other row goes on. Anything else that
        fails (the broker away, the producer broken) ends the batch: the rows acknowledged are
        marked, those still unanswered are kept ``in_flight`` and the others are sent again
        after a backoff."""
        if not rows:
            return 0
        producer = await self.start()
        sent: list[tuple[OutboxRow, asyncio.Future[Any]]] = []
        # Refused rows, and whether the refusal is the row's own for certain: raised by send()
        # for that record alone, not carried by the acknowledgement of a produce request that
        # may have held other rows too.
        refused: list[tuple[OutboxRow, BaseException, bool]] = []
        held: set[str] = set()  # sagas with a refused row: their later rows wait behind it
        # A topic that does not exist refuses every row of it, and finding that out takes
        # aiokafka a metadata wait (its request timeout): asked once a batch.
        topic_refused: dict[str, BaseException] = {}
        failure: BaseException | None = None
        failed_row: OutboxRow | None = None
        for row in rows:
            if row.saga_id in held:
                continue
            if not self._may_send():
                # The lead was lost while this batch was selected or sent (the relay hung, or
                # its lease was not renewed): the rows not sent yet are the next leader's.
                failure = LeadLost("the lead was lost during the batch")
                break
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
        acked: list[OutboxRow] = []
        if sent:
            # One wait for the whole batch. Awaiting each future in turn costs an event-loop
            # iteration per row even when it is already resolved, and under load one iteration
            # takes milliseconds: a batch of 200 rows took seconds to be "acknowledged".
            await asyncio.wait([fut for _, fut in sent],
                               timeout=self.settings.relay_publish_timeout_s)
        for i, (row, fut) in enumerate(sent):
            if row.saga_id in held:
                # Behind a refused row of its saga: sent again once that one is resolved.
                fut.add_done_callback(_ignore_outcome)
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
            self._give_up(sent[i:], held, acked)
            break
        if acked:
            self._acked(acked)
        for row, refusal, certain in refused:
            await self._refuse(row, refusal, certain)
        if failure is not None:
            if failed_row is not None:
                await self._record_failure(failed_row, failure, give_up=(
                    not isinstance(failure, BROKER_UNAVAILABLE)
                    and failed_row.attempts + 1 >= self.settings.relay_max_attempts))
            raise failure
        return len(acked)

    def _give_up(self, rest: list[tuple[OutboxRow, asyncio.Future[Any]]], held: set[str],
                 acked: list[OutboxRow]) -> None:
        """The sends of a batch from the one that failed on. Those Kafka acknowledged are
        ``acked`` (sent again, they would reach the topic twice); those not answered yet stay
        ``in_flight`` (the producer still holds them); those that failed are sent again with
        the next select, and so are the ones behind a refused row of their saga."""
        for row, fut in rest:
            if row.saga_id in held:
                fut.add_done_callback(_ignore_outcome)
            elif not fut.done():
                self.in_flight.append((row, fut))
            elif _acknowledged(fut):
                acked.append(row)

    async def _send(self, producer: Any, row: OutboxRow) -> asyncio.Future[Any]:
        value = jsonio.dumpb(row.payload)
        row_headers = dict(row.headers)
        # The trace goes on from the transaction that wrote the row, through this publish.
        with tracing.span(
                f"send {row.topic}", traceparent=row.traceparent,
                tracestate=row_headers.get(h.TRACESTATE), kind=SpanKind.PRODUCER,
                attributes={**tracing.messaging_attributes("send", row.topic, row.saga_id),
                            **tracing.attributes(id=row.saga_id, event_type=row.event_type)}):
            if tracing.enabled():
                row_headers.update(tracing.current_trace_headers())
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

    async def _refuse(self, row: OutboxRow, exc: BaseException, certain: bool) -> None:
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

    async def _record_failure(self, row: OutboxRow, exc: BaseException, *,
                              give_up: bool) -> None:
        """Counts the failure on the row, and fails it if ``give_up``: only on a row still
        pending, and only while the relay's epoch is the lease's. A relay that lost the lead
        meanwhile writes nothing: its failure could otherwise hold a saga's later rows behind a
        row the new leader published."""
        epoch = self._epoch()
        if epoch is None:
            return
        o, lease = self.tables.outbox, self.tables.relay_lease
        fenced = exists().where(lease.c.name == LEASE_NAME, lease.c.epoch == epoch)
        async with self.engine.begin() as conn:
            written = (await conn.execute(update(o).where(
                o.c.message_id == row.message_id, o.c.status == OUTBOX_PENDING, fenced).values(
                attempts=o.c.attempts + 1, last_error=repr(exc)[:2000],
                status=OUTBOX_FAILED if give_up else OUTBOX_PENDING))).rowcount
        if give_up and written:
            log.error("outbox row %s marked failed after %s attempts: %r", row.message_id,
                      row.attempts + 1, exc, extra={"service": self.service,
                                                   "saga_id": row.saga_id,
                                                   "event_type": row.event_type})


def _acknowledged(fut: asyncio.Future[Any]) -> bool:
    """Whether the send is done and Kafka acknowledged it (its error, if any, is retrieved)."""
    return fut.done() and not fut.cancelled() and fut.exception() is None


def _ignore_outcome(fut: asyncio.Future[Any]) -> None:
    """Retrieves a send's outcome nobody waits for, so asyncio does not log it as lost."""
    if not fut.cancelled():
        fut.exception()
