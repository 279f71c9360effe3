"""One attempt at a record's handler: in a unit of work of its own, within the handler timeout,
or in a transaction shared with other records'.

The unit of work claims the message in the inbox with its commit, so a duplicate is found there
and rolled back (``AlreadyProcessed``); another version of an event handled already, published
beside it, is one too (``sagakit.twins``). Unless the version first claimed was dead-lettered:
then the event was not handled, and its twin is, claimed under its own id, so that one version a
consumer could not handle does not lose the saga's event. A handler whose guarded write found the
state it decided on gone wrote nothing: that is a ``StaleRead``, retried at once like a lost race.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from opentelemetry.trace import SpanKind

from sagakit.consumer.records import Admitted
from sagakit.context import current_message
from sagakit.errors import HandlerTimedOut, StaleRead, is_connection_failure, sqlstate
from sagakit.observability import tracing
from sagakit.settings import MessagingSettings
from sagakit.store.conflicts import CONFLICT_SQLSTATES
from sagakit.store.shared_transaction import SharedTransaction
from sagakit.store.tables import INBOX_DEAD_LETTERED
from sagakit.store.unit_of_work import AlreadyProcessed, UnitOfWorkFactory
from sagakit.twins import claim_id


class Handling:
    def __init__(self, service: str, uow_factory: UnitOfWorkFactory,
                 settings: MessagingSettings) -> None:
        self.service = service
        self.uow_factory = uow_factory
        self.settings = settings

    async def alone(self, admitted: Admitted) -> str:
        """'processed' or 'duplicate'; raises what the handler or its commit raised, and
        ``HandlerTimedOut`` past ``handler_timeout_s``."""
        limit = self.settings.handler_timeout_s
        envelope = admitted.envelope
        try:
            async with asyncio.timeout(limit) as deadline:
                return await self._once(admitted)
        except TimeoutError as exc:
            if deadline.expired():
                # Ours, not a driver's connect timeout (that one means the database is down).
                raise HandlerTimedOut(f"{envelope.event_type} handler ran past {limit}s") from exc
            raise

    def span(self, admitted: Admitted) -> Any:
        """The CONSUMER span ``process {topic}`` (OpenTelemetry's messaging conventions; the
        consumer group is the service's name), continuing the trace of the record's headers."""
        envelope = admitted.envelope
        topic, partition, offset = admitted.message.address or (None, None, None)
        messaging = ({} if topic is None else tracing.messaging_attributes(
            "process", topic, envelope.saga_id, partition=partition, offset=offset,
            group=self.service))
        return tracing.span(
            f"process {topic or envelope.event_type}", traceparent=admitted.traceparent,
            tracestate=admitted.tracestate, kind=SpanKind.CONSUMER,
            attributes={**messaging, **tracing.attributes(
                id=envelope.saga_id, event_type=envelope.event_type,
                message_id=envelope.message_id, service=self.service)})

    async def _once(self, admitted: Admitted, claim: str | None = None) -> str:
        envelope, subscription = admitted.envelope, admitted.subscription
        claim = claim or claim_id(envelope)
        # A handler may ask for a stronger isolation level, or to read outside a transaction
        # and write with its commit statement alone (its Subscription says which).
        uow = self.uow_factory(**subscription.unit_of_work_options)
        with self.span(admitted) as span:
            try:
                async with uow:
                    uow.claim(claim, envelope.event_type, envelope.saga_id)
                    await subscription.handler(uow, admitted.message)
                    if not uow.ended:
                        await uow.commit()
                    if not uow.committed:
                        # The handler's guarded write found the state it decided on gone.
                        raise StaleRead(f"{envelope.event_type}: what the handler read "
                                        "changed before its write; nothing was written")
            except AlreadyProcessed:
                if await self._twin_of_a_dead_letter(claim, envelope.message_id):
                    return await self._once(admitted, claim=envelope.message_id)
                span.set_attribute("saga.duplicate", True)
                return "duplicate"
            except Exception as exc:
                # A duplicate runs the handler before its claim is checked (at commit), and
                # the state it finds is the one its first delivery left: a handler may well
                # refuse it. Then it is a duplicate, not a failure to retry or dead-letter.
                # (A lost race is retried at once, and a lost database cannot answer: the
                # retry's claim settles those.)
                if (sqlstate(exc) not in CONFLICT_SQLSTATES and not is_connection_failure(exc)
                        and await self._processed_before(claim)):
                    span.set_attribute("saga.duplicate", True)
                    return "duplicate"
                raise
        return "processed"

    async def _twin_of_a_dead_letter(self, claim: str, message_id: str) -> bool:
        """Whether a twin (claimed under its first version's id, ``claim``) found that version
        dead-lettered, not handled."""
        if claim == message_id:
            return False
        with contextlib.suppress(Exception):  # cannot tell: a duplicate, as the claim says
            async with self.uow_factory() as uow:
                return await uow.inbox_status(claim) == INBOX_DEAD_LETTERED
        return False

    async def _processed_before(self, message_id: str) -> bool:
        with contextlib.suppress(Exception):  # cannot tell: the original error stands
            async with self.uow_factory() as uow:
                return await uow.was_processed(message_id)
        return False

    async def shared(self, shared: SharedTransaction, admitted: Admitted) -> bool:
        """Runs the handler in ``shared``; whether its write went in (False: its guard found
        the state it decided on gone, and it wrote nothing)."""
        envelope = admitted.envelope
        token = current_message.set(envelope)
        try:
            with self.span(admitted):
                async with shared.unit() as uow:
                    uow.claim(claim_id(envelope), envelope.event_type, envelope.saga_id)
                    await admitted.subscription.handler(uow, admitted.message)
                    if not uow.ended:
                        await uow.commit()
                    return uow.committed
        finally:
            current_message.reset(token)
