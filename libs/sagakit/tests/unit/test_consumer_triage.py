"""What the consumer does with a record before any handler runs: unknown event types and
invalid payloads of handled events are dead letters (a payload the schema admits and the model
refuses too); events this service does not handle are skipped without validating their payload
(that is for the services that handle them)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from saga_contracts import registry
from saga_contracts.events import EVENT_MODELS
from sagakit.consumer import EventConsumer, Outcome, RawRecord, Subscription
from sagakit.envelope import Envelope
from sagakit.settings import MessagingSettings


def _record(event_type: str, payload: dict[str, Any]) -> RawRecord:
    envelope = Envelope.new(saga_id=str(uuid.uuid4()), event_type=event_type,
                            schema_version="1.0.0", source_service="pedidos", payload=payload)
    return RawRecord("order-events", 0, 0, envelope.saga_id.encode(),
                     json.dumps(envelope.to_dict()).encode(), [])


class DeadLetterReasons:
    """Writes no letter: keeps why each record was given up on."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    async def write(self, raw: RawRecord, envelope: Any, reason: str, *_: Any) -> Outcome:
        self.reasons.append(reason)
        return Outcome("dead_lettered")


def _consumer(handled: list[str]) -> tuple[EventConsumer, list[str]]:
    async def handler(*_: Any) -> None:
        raise AssertionError("no handler may run for these records")

    letters = DeadLetterReasons()
    consumer = EventConsumer(service="s", topics=["order-events"],
                             subscriptions=[Subscription(EVENT_MODELS[t], handler)
                                            for t in handled],
                             uow_factory=lambda: None, settings=MessagingSettings(),
                             dead_letters=letters)
    return consumer, letters.reasons


async def test_an_event_this_service_does_not_handle_is_skipped_whatever_its_payload() -> None:
    consumer, reasons = _consumer(["OrdenSolicitada"])
    outcome = await consumer.processor.process(_record("OrdenCompletada", {"not": "its schema"}))
    assert outcome.status == "skipped"
    assert reasons == []


async def test_an_invalid_payload_of_a_handled_event_is_a_dead_letter() -> None:
    consumer, reasons = _consumer(["OrdenCompletada"])
    outcome = await consumer.processor.process(_record("OrdenCompletada", {"not": "its schema"}))
    assert outcome.status == "dead_lettered"
    assert reasons == ["schema_invalid"]


async def test_an_event_type_unknown_to_the_catalogue_is_a_dead_letter_even_if_not_handled(
        ) -> None:
    consumer, reasons = _consumer(["OrdenSolicitada"])
    outcome = await consumer.processor.process(_record("PedidoTeletransportado", {"x": 1}))
    assert outcome.status == "dead_lettered"
    assert reasons == ["unknown_event_type"]


async def test_a_payload_its_schema_admits_and_its_model_refuses_is_a_dead_letter() -> None:
    # The schema's pattern, checked by Python's re, lets "$" match before a final newline; the
    # model's, a Rust regex, does not (saga_contracts.events.fields).
    payload = {"order_id": str(uuid.uuid4()), "total_amount": "10.00\n", "currency": "EUR"}
    registry.validate("OrdenCompletada", "1.0.0", payload)
    consumer, reasons = _consumer(["OrdenCompletada"])
    outcome = await consumer.processor.process(_record("OrdenCompletada", payload))
    assert outcome.status == "dead_lettered"
    assert reasons == ["schema_invalid"]


async def test_an_order_of_1_0_0_with_its_token_in_the_clear_is_a_dead_letter() -> None:
    """Valid against the 1.0.0 schema it names, refused by the model of 2.0.0, which carries
    the token sealed: no handler ever gets a token in the clear."""
    payload = {"order_id": str(uuid.uuid4()), "customer_id": "c-1",
               "items": [{"sku": "A", "quantity": 1, "price": "1.00"}], "total_amount": "1.00",
               "currency": "USD",
               "shipping_address": {"street": "s", "city": "c", "country": "PE",
                                    "postal_code": "1"},
               "payment_method": {"type": "credit_card", "token": "tok_visa"}}
    registry.validate("OrdenSolicitada", "1.0.0", payload)
    consumer, reasons = _consumer(["OrdenSolicitada"])
    outcome = await consumer.processor.process(_record("OrdenSolicitada", payload))
    assert outcome.status == "dead_lettered"
    assert reasons == ["schema_invalid"]
