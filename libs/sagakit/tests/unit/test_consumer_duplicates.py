"""A duplicate delivery runs its handler before its inbox claim is checked at commit. When the
handler refuses it (the first delivery has moved the state on), the consumer must see a
duplicate, not a failure to retry or dead-letter."""

from __future__ import annotations

import json
import uuid
from types import TracebackType
from typing import Any

from saga_contracts.events.orders import OrdenCompletada
from sagakit.consumer import EventConsumer, Outcome, RawRecord, Subscription
from sagakit.envelope import Envelope
from sagakit.errors import PermanentError
from sagakit.message import Message
from sagakit.settings import MessagingSettings
from sagakit.store.unit_of_work import AlreadyProcessed


class FakeUnitOfWork:
    """The inbox semantics of the real one: the claim is checked when the work commits."""

    def __init__(self, inbox: set[str], dead_lettered: set[str] | None = None) -> None:
        self.inbox = inbox
        self.dead_lettered = dead_lettered if dead_lettered is not None else set()
        """The claims of ``inbox`` that are dead letters."""
        self.claimed: str | None = None
        self.committed = self.ended = False

    async def __aenter__(self) -> FakeUnitOfWork:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None

    def claim(self, message_id: str, *_: Any, **__: Any) -> None:
        self.claimed = message_id

    async def commit(self) -> bool:
        assert self.claimed is not None
        if self.claimed in self.inbox:
            raise AlreadyProcessed(self.claimed)
        self.inbox.add(self.claimed)
        self.committed = self.ended = True
        return True

    async def was_processed(self, message_id: str) -> bool:
        return message_id in self.inbox

    async def inbox_status(self, message_id: str) -> str | None:
        if message_id not in self.inbox:
            return None
        return "dead_lettered" if message_id in self.dead_lettered else "processed"


def _record() -> RawRecord:
    envelope = Envelope.new(saga_id=str(uuid.uuid4()), event_type="OrdenCompletada",
                            schema_version="1.0.0", source_service="pedidos",
                            payload={"order_id": str(uuid.uuid4()),
                                     "total_amount": "10.00", "currency": "EUR"})
    return RawRecord("order-events", 0, 0, envelope.saga_id.encode(),
                     json.dumps(envelope.to_dict()).encode(), [])


async def test_a_duplicate_its_handler_refuses_is_a_duplicate_not_a_dead_letter() -> None:
    inbox: set[str] = set()
    handled: list[str] = []

    async def handler(uow: Any, event: Message[OrdenCompletada]) -> None:
        if handled:  # the first delivery moved the state on: this handler refuses
            raise PermanentError("order already completed")
        handled.append(event.message_id)

    dead_letters: list[str] = []

    class DeadLetters:
        async def write(self, raw: RawRecord, envelope: Any, reason: str, *_: Any) -> Outcome:
            dead_letters.append(reason)
            return Outcome("dead_lettered")

    consumer = EventConsumer(service="s", topics=["order-events"],
                             subscriptions=[Subscription(OrdenCompletada, handler)],
                             uow_factory=lambda: FakeUnitOfWork(inbox),
                             settings=MessagingSettings(), dead_letters=DeadLetters())
    record = _record()
    outcomes = [(await consumer.processor.process(record)).status for _ in range(3)]
    assert outcomes == ["processed", "duplicate", "duplicate"]
    assert dead_letters == []
