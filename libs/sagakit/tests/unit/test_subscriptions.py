"""Handlers are declared with typed subscriptions: the options a subscription states are what
its handler's unit of work is opened with, a handler may share a transaction only when it reads
outside one, the topics a consumer reads follow from the subscribed events, and the handler
gets the payload as its subscription's model."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

import pytest

from saga_contracts.events import EVENT_MODELS
from saga_contracts.events.orders import OrdenCompletada
from sagakit.consumer import EventConsumer, RawRecord, Subscription, topics_of
from sagakit.envelope import Envelope
from sagakit.message import Message
from sagakit.settings import MessagingSettings

from .consumer_fakes import CommittingUnitOfWork


async def _noop(uow: Any, event: Message[Any]) -> None:
    return None


def test_a_handler_may_share_a_transaction_only_when_it_reads_outside_one() -> None:
    with pytest.raises(ValueError, match="cannot share a transaction"):
        Subscription(OrdenCompletada, _noop, shares_transaction=True)
    with pytest.raises(ValueError, match="cannot share a transaction"):
        Subscription(OrdenCompletada, _noop, reads_outside_transaction=True,
                     shares_transaction=True, isolation_level="REPEATABLE READ")
    Subscription(OrdenCompletada, _noop, reads_outside_transaction=True,
                 shares_transaction=True)


def test_an_event_type_is_subscribed_to_once() -> None:
    with pytest.raises(ValueError, match="subscribed to twice"):
        EventConsumer(service="s", topics=["order-events"],
                      subscriptions=[Subscription(OrdenCompletada, _noop),
                                     Subscription(OrdenCompletada, _noop)],
                      uow_factory=lambda **_: None, settings=MessagingSettings())


def test_the_topics_are_those_the_subscribed_events_are_published_on_in_order() -> None:
    subscriptions = [Subscription(EVENT_MODELS[t], _noop) for t in
                     ("OrdenSolicitada", "PagoExitoso", "OrdenCancelada", "PagoRechazado")]
    assert topics_of(subscriptions) == ["order-events", "payment-events"]


def _record(event_type: str, payload: dict[str, Any]) -> RawRecord:
    envelope = Envelope.new(saga_id=str(uuid.uuid4()), event_type=event_type,
                            schema_version="1.0.0", source_service="pedidos", payload=payload)
    return RawRecord("order-events", 0, 0, envelope.saga_id.encode(),
                     json.dumps(envelope.to_dict()).encode(), [])


@pytest.mark.parametrize(("options", "opened_with"), [
    ({}, {}),
    ({"reads_outside_transaction": True}, {"reads_outside_transaction": True}),
    ({"isolation_level": "REPEATABLE READ"}, {"isolation_level": "REPEATABLE READ"}),
])
async def test_the_unit_of_work_is_opened_with_what_the_subscription_states(
        options: dict[str, Any], opened_with: dict[str, Any]) -> None:
    opened: list[dict[str, Any]] = []
    consumer = EventConsumer(service="s", topics=["order-events"],
                             subscriptions=[Subscription(OrdenCompletada, _noop, **options)],
                             uow_factory=lambda **kw: CommittingUnitOfWork(opened, **kw),
                             settings=MessagingSettings())
    record = _record("OrdenCompletada", {"order_id": str(uuid.uuid4()),
                                         "total_amount": "10.00", "currency": "EUR"})
    assert (await consumer.processor.process(record)).status == "processed"
    assert opened == [opened_with]


async def test_the_handler_gets_the_payload_as_its_model_and_the_envelope_as_it_came() -> None:
    got: list[Message[OrdenCompletada]] = []

    async def handler(uow: Any, event: Message[OrdenCompletada]) -> None:
        got.append(event)

    consumer = EventConsumer(service="s", topics=["order-events"],
                             subscriptions=[Subscription(OrdenCompletada, handler)],
                             uow_factory=lambda **kw: CommittingUnitOfWork([], **kw),
                             settings=MessagingSettings())
    payload = {"order_id": str(uuid.uuid4()), "total_amount": "10.50", "currency": "EUR",
               "added_by_a_newer_minor": True}
    record = _record("OrdenCompletada", payload)
    assert (await consumer.processor.process(record)).status == "processed"
    [event] = got
    assert isinstance(event.payload, OrdenCompletada)
    assert event.payload.total_amount == Decimal("10.50")
    assert event.envelope.payload == payload
    assert record.key is not None and event.saga_id == record.key.decode()
