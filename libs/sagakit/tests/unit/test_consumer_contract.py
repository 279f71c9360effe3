"""A handled event believed only when it comes the way its contract says: on its schema's topic
(``x-topic``), from its schema's producer (``x-producer``), keyed by its saga id, with no
``X-Saga-ID`` header naming another saga. Anything else is dead-lettered as
``contract_violation`` and its handler never runs; a record that keeps the contract, and the
replay ``sagactl`` makes of one, reach the handler."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from saga_contracts import headers as h
from saga_contracts.events.payments import PagoExitoso
from sagakit import dead_letters
from sagakit.consumer import EventConsumer, Origin, Outcome, RawRecord, Subscription
from sagakit.dead_letters import Attempt, Original
from sagakit.envelope import Envelope
from sagakit.message import Message
from sagakit.operations import replay
from sagakit.settings import MessagingSettings

from .consumer_fakes import CommittingUnitOfWork

SERVICE = "inventario"


class _DeadLetters:
    """Writes no letter: keeps why, and what was said, for each record given up on."""

    def __init__(self) -> None:
        self.letters: list[tuple[str, str]] = []

    async def write(self, raw: RawRecord, envelope: Any, reason: str, exc: BaseException,
                    attempts: list[Attempt]) -> Outcome:
        self.letters.append((reason, attempts[-1].error))
        return Outcome("dead_lettered")


def _consumer(origins: dict[str, Origin] | None = None
              ) -> tuple[EventConsumer, list[str], list[tuple[str, str]]]:
    """inventario's consumer of PagoExitoso: the saga ids its handler got, and its letters."""
    handled: list[str] = []

    async def allocate(uow: Any, event: Message[PagoExitoso]) -> None:
        handled.append(event.saga_id)

    letters = _DeadLetters()
    consumer = EventConsumer(service=SERVICE, topics=["payment-events"],
                             subscriptions=[Subscription(PagoExitoso, allocate)],
                             uow_factory=lambda **_: CommittingUnitOfWork(),
                             settings=MessagingSettings(), dead_letters=letters,
                             origins=origins)
    return consumer, handled, letters.letters


def _paid(source: str = "pagos") -> Envelope:
    return Envelope.new(saga_id=str(uuid.uuid4()), event_type="PagoExitoso",
                        schema_version="1.0.0", source_service=source,
                        payload={"order_id": str(uuid.uuid4()),
                                 "payment_id": str(uuid.uuid4()), "charge_id": "ch_1",
                                 "amount": "10.00", "currency": "USD"})


def _record(envelope: Envelope, *, topic: str = "payment-events", key: bytes | None = None,
            headers: dict[str, str] | None = None) -> RawRecord:
    """``envelope`` as the relay publishes it, unless told otherwise."""
    return RawRecord(topic, 0, 7, envelope.saga_id.encode() if key is None else key,
                     json.dumps(envelope.to_dict()).encode(),
                     [(k, v.encode()) for k, v in
                      (envelope.kafka_headers() if headers is None else headers).items()])


async def test_a_record_as_its_producer_publishes_it_reaches_its_handler() -> None:
    consumer, handled, letters = _consumer()
    paid = _paid()
    assert (await consumer.processor.process(_record(paid))).status == "processed"
    assert handled == [paid.saga_id]
    assert letters == []


async def test_a_record_without_tracing_headers_keeps_the_contract() -> None:
    # Tools and tests write records without headers; the envelope is what is checked.
    consumer, handled, _ = _consumer()
    paid = _paid()
    assert (await consumer.processor.process(_record(paid, headers={}))).status == "processed"
    assert handled == [paid.saga_id]


def _forged_by_another_producer() -> tuple[RawRecord, list[str]]:
    return _record(_paid(source="inventario")), ["from 'inventario'"]


def _forged_on_another_topic() -> tuple[RawRecord, list[str]]:
    return _record(_paid(), topic="order-events"), ["on topic 'order-events'"]


def _keyed_by_another_saga() -> tuple[RawRecord, list[str]]:
    other = str(uuid.uuid4())
    return _record(_paid(), key=other.encode()), [f"with key '{other}'"]


def _without_a_key() -> tuple[RawRecord, list[str]]:
    paid = _paid()
    record = _record(paid)
    record.key = None
    return record, ["with no key"]


def _another_saga_in_its_header() -> tuple[RawRecord, list[str]]:
    paid = _paid()
    other = str(uuid.uuid4())
    return (_record(paid, headers={**paid.kafka_headers(), h.SAGA_ID: other}),
            [f"with X-Saga-ID '{other}'"])


def _everything_wrong() -> tuple[RawRecord, list[str]]:
    return (_record(_paid(source="test"), topic="inventory-events", key=b"k"),
            ["on topic 'inventory-events'", "from 'test'", "with key 'k'"])


@pytest.mark.parametrize("forged", [
    _forged_by_another_producer, _forged_on_another_topic, _keyed_by_another_saga,
    _without_a_key, _another_saga_in_its_header, _everything_wrong,
])
async def test_a_record_that_breaks_its_contract_is_a_dead_letter_and_changes_nothing(
        forged: Any) -> None:
    consumer, handled, letters = _consumer()
    record, said = forged()
    outcome = await consumer.processor.process(record)
    assert outcome.status == "dead_lettered"
    assert handled == []
    [(reason, detail)] = letters
    assert reason == "contract_violation"
    # What was expected, and what came instead.
    assert "PagoExitoso comes on topic 'payment-events' from 'pagos'" in detail
    for part in said:
        assert part in detail
    assert "ch_1" not in detail, "nothing of the payload is quoted"


async def test_a_forged_record_is_refused_before_its_payload_is_looked_at() -> None:
    consumer, handled, letters = _consumer()
    forged = Envelope.new(saga_id=str(uuid.uuid4()), event_type="PagoExitoso",
                          schema_version="1.0.0", source_service="inventario",
                          payload={"not": "its schema"})
    assert (await consumer.processor.process(_record(forged))).status == "dead_lettered"
    assert [reason for reason, _ in letters] == ["contract_violation"]
    assert handled == []


async def test_what_the_sender_chose_is_quoted_short() -> None:
    consumer, _, letters = _consumer()
    await consumer.processor.process(_record(_paid(source="x" * 10_000)))
    [(_, detail)] = letters
    assert len(detail) < 400


async def test_an_event_this_service_does_not_handle_is_skipped_wherever_it_comes_from() -> None:
    consumer, handled, letters = _consumer()
    other = Envelope.new(saga_id=str(uuid.uuid4()), event_type="StockAsignado",
                         schema_version="1.0.0", source_service="pagos", payload={})
    outcome = await consumer.processor.process(_record(other, key=b"k"))
    assert outcome.status == "skipped"
    assert (handled, letters) == ([], [])


def _replay_of(record: RawRecord, envelope: Envelope) -> RawRecord:
    """The dead letter ``SERVICE``'s consumer writes of ``record``, replayed by ``sagactl
    replay`` and read back as the consumer reads what ``replay.publish`` sends."""
    letter = dead_letters.build(
        service=SERVICE, reason="retries_exhausted", error_class="TransientError",
        attempts=[Attempt(1, "2026-01-01T00:00:00Z", "TransientError('busy')")],
        last_traceback="", saga_id=envelope.saga_id,
        original=Original(record.topic, record.value, envelope.message_id, envelope.event_type,
                          record.key, record.headers, record.partition, record.offset))
    plan = replay.build(replay.claimed_record(letter.value), SERVICE, str(uuid.uuid4()))
    return RawRecord(plan.topic, 0, 8, plan.key.encode(), json.dumps(plan.value).encode(),
                     [(k, v.encode()) for k, v in plan.headers.items()])


async def test_a_replayed_dead_letter_keeps_the_contract_and_reaches_its_handler() -> None:
    consumer, handled, letters = _consumer()
    paid = _paid()
    replayed = _replay_of(_record(paid), paid)
    assert (await consumer.processor.process(replayed)).status == "processed"
    assert handled == [paid.saga_id]
    assert letters == []


async def test_a_replay_of_a_record_that_came_without_a_key_is_keyed_by_its_saga() -> None:
    consumer, handled, _ = _consumer()
    paid = _paid()
    original = _record(paid)
    original.key = None
    assert (await consumer.processor.process(_replay_of(original, paid))).status == "processed"
    assert handled == [paid.saga_id]


async def test_a_replay_cannot_launder_a_forged_record() -> None:
    consumer, handled, letters = _consumer()
    forged = _paid(source="inventario")
    assert (await consumer.processor.process(_replay_of(_record(forged), forged))).status \
        == "dead_lettered"
    assert handled == []
    assert [reason for reason, _ in letters] == ["contract_violation"]


async def test_a_consumer_of_a_scratch_topic_names_the_topic_it_reads() -> None:
    consumer, handled, letters = _consumer({"PagoExitoso": Origin("scratch", "pagos")})
    paid = _paid()
    assert (await consumer.processor.process(_record(paid, topic="scratch"))).status \
        == "processed"
    assert (await consumer.processor.process(_record(_paid()))).status == "dead_lettered"
    assert handled == [paid.saga_id]
    assert [reason for reason, _ in letters] == ["contract_violation"]


def test_a_handled_event_type_without_an_origin_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="PagoExitoso"):
        _consumer({"StockAsignado": Origin("inventory-events", "inventario")})
