"""One event published in two versions (``sagakit.twins``): the consumer handles a saga's event
once whichever version it reads, reads first, or moved to between the two, the second a
duplicate as a message delivered twice is; each version counted as used
(``saga_schema_version_in_use_total``)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from prometheus_client import REGISTRY

from saga_contracts.events.orders import OrdenSolicitada, OrdenSolicitada_v4
from saga_harness.events import orden_solicitada, orden_solicitada_v4
from sagakit.consumer import EventConsumer, Outcome, RawRecord, Subscription
from sagakit.envelope import Envelope
from sagakit.errors import PermanentError
from sagakit.fakes import FakeUnitOfWork as EmittingUnitOfWork
from sagakit.message import Message
from sagakit.settings import MessagingSettings
from sagakit.twins import TWIN_OF, claim_id, emit_versions, versions_setting

from .test_consumer_duplicates import FakeUnitOfWork

BOTH = ("OrdenSolicitada", "OrdenSolicitada_v4")


def _twins() -> tuple[Envelope, Envelope]:
    """An order in both versions, as pedidos emits them (the second a twin of the first)."""
    saga_id = str(uuid.uuid4())
    v3 = orden_solicitada(("A", 1), saga_id=saga_id).payload
    v4 = orden_solicitada_v4(("A", 1), saga_id=saga_id).payload
    first, twin = emit_versions(EmittingUnitOfWork("pedidos"), [v3, v4], saga_id=saga_id)
    return first, twin


def _record(envelope: Envelope, offset: int) -> RawRecord:
    return RawRecord("order-events", 0, offset, envelope.saga_id.encode(),
                     json.dumps(envelope.to_dict()).encode(), [])


def _consumer(reads: tuple[str, ...], inbox: set[str], handled: list[str]) -> EventConsumer:
    async def on_v3(uow: Any, event: Message[OrdenSolicitada]) -> None:
        handled.append(event.event_type)

    async def on_v4(uow: Any, event: Message[OrdenSolicitada_v4]) -> None:
        handled.append(event.event_type)

    subscriptions = {"OrdenSolicitada": Subscription(OrdenSolicitada, on_v3),
                     "OrdenSolicitada_v4": Subscription(OrdenSolicitada_v4, on_v4)}
    return EventConsumer(service="inventario", topics=["order-events"],
                         subscriptions=[subscriptions[t] for t in reads],
                         uow_factory=lambda: FakeUnitOfWork(inbox), settings=MessagingSettings())


def test_the_twin_names_the_first_and_both_claim_the_same_id() -> None:
    first, twin = _twins()
    assert twin.metadata[TWIN_OF] == first.message_id != twin.message_id
    assert claim_id(first) == claim_id(twin) == first.message_id
    too_long = Envelope.new(saga_id=first.saga_id, event_type="OrdenSolicitada",
                            schema_version="3.0.0", source_service="pedidos", payload={},
                            metadata={TWIN_OF: "x" * 65})
    assert claim_id(too_long) == too_long.message_id


@pytest.mark.parametrize("order", ["first_then_twin", "twin_then_first"])
async def test_a_consumer_that_reads_both_handles_the_saga_once(order: str) -> None:
    inbox: set[str] = set()
    handled: list[str] = []
    consumer = _consumer(BOTH, inbox, handled)
    first, twin = _twins()
    records = [first, twin] if order == "first_then_twin" else [twin, first]
    outcomes = [(await consumer.processor.process(_record(e, i))).status
                for i, e in enumerate(records)]
    # The duplicate's handler ran, as a redelivery's does, and its commit was refused: one
    # claim in the inbox, the first's.
    assert outcomes == ["processed", "duplicate"]
    assert handled[0] == records[0].event_type and inbox == {first.message_id}


async def test_a_consumer_moved_to_the_new_version_does_not_handle_the_saga_again() -> None:
    inbox: set[str] = set()
    handled: list[str] = []
    first, twin = _twins()
    before = _consumer(("OrdenSolicitada",), inbox, handled)
    assert (await before.processor.process(_record(first, 0))).status == "processed"
    assert (await before.processor.process(_record(twin, 1))).status == "skipped"
    # Restarted reading only OrdenSolicitada_v4, and the twin delivered again.
    after = _consumer(("OrdenSolicitada_v4",), inbox, handled)
    assert (await after.processor.process(_record(twin, 1))).status == "duplicate"
    assert inbox == {first.message_id}


async def test_each_version_handled_counts_as_used() -> None:
    def used(event: str, version: str) -> float:
        return REGISTRY.get_sample_value("saga_schema_version_in_use_total", {
            "event": event, "version": version, "service": "inventario"}) or 0.0

    before = used("OrdenSolicitada_v4", "4.0.0"), used("OrdenSolicitada", "3.0.0")
    consumer = _consumer(("OrdenSolicitada_v4",), set(), [])
    first, twin = _twins()
    await consumer.processor.process(_record(first, 0))
    await consumer.processor.process(_record(twin, 1))
    assert (used("OrdenSolicitada_v4", "4.0.0"), used("OrdenSolicitada", "3.0.0")) == (
        before[0] + 1, before[1])


def test_a_versions_setting_names_known_versions_each_once() -> None:
    assert versions_setting(" OrdenSolicitada_v4 ,OrdenSolicitada", BOTH) == [
        "OrdenSolicitada_v4", "OrdenSolicitada"]
    for wrong in ("", "OrdenSolicitada_v2", "OrdenSolicitada,OrdenSolicitada"):
        with pytest.raises(ValueError, match="one or more of"):
            versions_setting(wrong, BOTH)


async def test_the_twin_of_a_dead_lettered_version_is_handled_claimed_under_its_own_id() -> None:
    """The version first claimed could not be handled and was dead-lettered under its id: the
    saga's event was not handled, so its twin is, claimed under its own id (one dead-lettered
    version must not lose the event); a twin of one handled stays a duplicate."""
    inbox: set[str] = set()
    dead: set[str] = set()
    handled: list[str] = []
    first, twin = _twins()

    class DeadLetters:
        async def write(self, raw: RawRecord, envelope: Any, reason: str, *_: Any) -> Outcome:
            inbox.add(envelope.message_id)
            dead.add(envelope.message_id)
            return Outcome("dead_lettered")

    async def on_v3(uow: Any, event: Message[OrdenSolicitada]) -> None:
        raise PermanentError("this version cannot be handled")

    async def on_v4(uow: Any, event: Message[OrdenSolicitada_v4]) -> None:
        handled.append(event.message_id)

    consumer = EventConsumer(service="inventario", topics=["order-events"],
                             subscriptions=[Subscription(OrdenSolicitada, on_v3),
                                            Subscription(OrdenSolicitada_v4, on_v4)],
                             uow_factory=lambda: FakeUnitOfWork(inbox, dead),
                             settings=MessagingSettings(), dead_letters=DeadLetters())
    outcomes = [(await consumer.processor.process(_record(e, i))).status
                for i, e in enumerate([first, twin, twin])]

    # The twin's handler ran more than once, as a duplicate's does; one claim committed.
    assert outcomes == ["dead_lettered", "processed", "duplicate"]
    assert set(handled) == {twin.message_id}
    assert inbox == {first.message_id, twin.message_id} and dead == {first.message_id}
