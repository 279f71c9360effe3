"""The consumer's Kafka session: subscribe, fetch, hand each partition's records to its lane,
send the offsets, and start over with a new consumer when Kafka is lost or the session breaks.

``EventConsumer`` is also where the consumer's parts are put together (see the package's
docstring for what each does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from saga_contracts.replay_signature import OperatorKeys
from sagakit import plugins
from sagakit.consumer.admission import Admission
from sagakit.consumer.contract import Origin
from sagakit.consumer.dead_lettering import DeadLetters, DeadLetterWriter
from sagakit.consumer.delivery import InOrder
from sagakit.consumer.handling import Handling
from sagakit.consumer.lanes import Lanes
from sagakit.consumer.offsets import Offsets
from sagakit.consumer.partitions import Partitions
from sagakit.consumer.processing import Processor
from sagakit.consumer.reporting import Report
from sagakit.consumer.retry_policy import INFRASTRUCTURE_BACKOFF, RetryPolicy
from sagakit.consumer.shared_runs import SharedRuns
from sagakit.consumer.subscription import Subscription, by_event_type
from sagakit.kafka import manual_commit_consumer
from sagakit.schema_registry import Schemas
from sagakit.settings import MessagingSettings
from sagakit.store.reachability import Reachability
from sagakit.store.shared_transaction import SharedTransaction
from sagakit.store.unit_of_work import UnitOfWorkFactory

log = logging.getLogger("sagakit.consumer")


class _BeforeRebalance(ConsumerRebalanceListener):
    """Runs ``then`` before partitions are shared out again (aiokafka awaits it), and ``joined``
    once they are, whatever this member got: a replica beyond the partition count gets none
    and is still a member of its group, ready to take partitions over."""

    def __init__(self, then: Callable[[], Awaitable[None]],
                 joined: Callable[[], None] = lambda: None) -> None:
        self._then = then
        self._joined = joined

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self._then()

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self._joined()


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


class DatabaseLost(Exception):
    """This instance's database stopped answering (``sagakit.store.reachability``): the
    session ends, which leaves the group, and the next one starts once it answers."""


class EventConsumer:
    """Consumes ``topics`` for ``service`` and hands each record of the subscribed event types
    to its handler, in a unit of work from ``uow_factory``."""

    def __init__(self, *, service: str, topics: list[str],
                 subscriptions: Sequence[Subscription[Any]], uow_factory: UnitOfWorkFactory,
                 settings: MessagingSettings,
                 shared_transaction: Callable[[], SharedTransaction] | None = None,
                 dead_letters: DeadLetterWriter | None = None,
                 origins: Mapping[str, Origin] | None = None,
                 reachability: Reachability | None = None,
                 schemas: Schemas | None = None) -> None:
        """``dead_letters``: where records given up on go (by default through the outbox of
        ``uow_factory``'s units of work). ``origins``: the topic and producer each handled event
        type must come from, by default its schema's; a test that reads a scratch topic names
        that topic here. ``reachability``: while it says the database is lost, this consumer
        stays out of its group. ``schemas``: what payloads are validated against
        (``sagakit.schema_registry``); the contracts' package's by default."""
        self.service = service
        self.topics = topics
        self.settings = settings
        report = Report(service)
        handling = Handling(service, uow_factory, settings)
        admission = Admission(service, by_event_type(subscriptions), origins,
                              OperatorKeys.parse(settings.operator_public_keys), schemas)
        self.processor = Processor(service, admission, handling, RetryPolicy(settings),
                                   dead_letters or DeadLetters(service, uow_factory), report)
        self.offsets = Offsets(service, settings)
        self.shared_runs = SharedRuns(service, settings, handling, report, shared_transaction)
        self.partitions = Partitions(
            self.processor, self.shared_runs, self.offsets,
            plugins.wrapped(InOrder(), "wrap_delivery", plugins.load(settings.plugins),
                            self.processor.until_decided),
            settings)
        self.reachability = reachability
        self.kafka: AIOKafkaConsumer | None = None
        """The Kafka consumer of the current session; None between sessions."""
        self._restarts = 0
        self.assigned = asyncio.Event()
        """Set once the consumer has joined its group (with partitions or, a replica beyond
        the partition count, none): /ready's Kafka check."""

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if not await self._database_answers(stop):
                return
            consumer = manual_commit_consumer(self.settings, self.service, self.topics,
                                              f"{self.service}-consumer",
                                              self.settings.consumer_fetch_max_wait_ms,
                                              _BeforeRebalance(self._commit_before_rebalance,
                                                               self.assigned.set))
            try:
                await consumer.start()
                self.kafka = consumer
                await self._session(consumer, stop)
            except asyncio.CancelledError:
                raise
            except DatabaseLost as exc:
                log.warning("consumer leaving its group: %s", exc,
                            extra={"service": self.service})
            except Exception as exc:
                # Kafka gone, or anything else that broke this consumer (aiokafka's background
                # tasks can die of errors it does not expect, aio-libs/aiokafka#1038): a new
                # consumer after a backoff; what was not committed is fetched again.
                self._restarts += 1
                delay = INFRASTRUCTURE_BACKOFF.delay(self._restarts)
                if isinstance(exc, KafkaError | OSError):
                    log.warning("consumer lost Kafka, reconnecting in %.2fs: %r", delay, exc,
                                extra={"service": self.service})
                else:
                    log.error("consumer failed, restarting it in %.2fs", delay, exc_info=exc,
                              extra={"service": self.service})
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            finally:
                self.kafka = None
                self.assigned.clear()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(consumer.stop(), 10)

    async def _database_answers(self, stop: asyncio.Event) -> bool:
        """Waits while the database is lost to this instance; False when stopped meanwhile."""
        if self.reachability is None or not self.reachability.lost.is_set():
            return True
        regained = asyncio.create_task(self.reachability.regained.wait())
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({regained, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in (regained, stopped):
            task.cancel()
        return not stop.is_set()

    async def refresh_lag(self) -> None:
        if self.kafka is not None:
            await self.offsets.refresh_lag(self.kafka)

    async def _commit_before_rebalance(self) -> None:
        if self.kafka is not None:
            await self.offsets.before_rebalance(self.kafka)

    async def _session(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        lanes = Lanes(self.partitions, self.settings)
        committer = asyncio.create_task(self.offsets.committer(consumer, stop))
        try:
            await self._fetch(consumer, lanes, stop)
        finally:
            committer.cancel()
            await lanes.stop()
            await asyncio.gather(committer, return_exceptions=True)
            with contextlib.suppress(KafkaError):
                await self.offsets.commit(consumer)

    async def _fetch(self, consumer: AIOKafkaConsumer, lanes: Lanes, stop: asyncio.Event) -> None:
        while not stop.is_set():
            lanes.raise_if_crashed()
            if self.reachability is not None and self.reachability.lost.is_set():
                raise DatabaseLost(f"no answer from the database for "
                                   f"{self.reachability.lost_after_s:.0f}s")
            batch = await consumer.getmany(timeout_ms=1000,
                                           max_records=self.settings.consumer_max_records)
            _check_fetcher_alive(consumer)
            if consumer.assignment():
                self.assigned.set()
                self._restarts = 0  # the backoff grows only while restarts keep failing
            for tp, records in batch.items():
                lanes.enqueue(consumer, tp, records)
