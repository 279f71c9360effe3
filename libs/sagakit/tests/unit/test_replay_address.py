"""A replay addressed with ``X-Replay-For`` to another service is skipped only when the operator
signed it for that very record; any other ``X-Replay-For`` hides nothing: the record is handled
as if it had none, and counted and logged as a forged replay. The records run through
inventario's consumer of PagoExitoso as ``sagactl replay`` builds them."""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import replace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saga_contracts import headers as h
from saga_contracts import replay_signature
from saga_contracts.events.payments import PagoExitoso
from saga_contracts.replay_signature import OperatorKeys
from sagakit import dead_letters
from sagakit.consumer import EventConsumer, Outcome, RawRecord, Subscription
from sagakit.dead_letters import Attempt, Original
from sagakit.envelope import Envelope
from sagakit.message import Message
from sagakit.observability import metrics
from sagakit.operations import replay
from sagakit.settings import InvalidConfiguration, MessagingSettings, load

from .consumer_fakes import CommittingUnitOfWork

SERVICE = "inventario"
OPERATOR = Ed25519PrivateKey.generate()
OPERATOR_KEYS = replay_signature.public_entry(OPERATOR)


class _NoLetters:
    async def write(self, raw: RawRecord, envelope: Any, reason: str, exc: BaseException,
                    attempts: list[Attempt]) -> Outcome:
        raise AssertionError(f"dead-lettered: {reason} {attempts[-1].error}")


def _consumer(keys: str | None = OPERATOR_KEYS, replayed: list[bool] | None = None
              ) -> tuple[EventConsumer, list[str]]:
    """inventario's consumer of PagoExitoso, believing the operator's key, and the saga ids its
    handler got (``replayed``: whether it got each as a replay)."""
    handled: list[str] = []

    async def allocate(uow: Any, event: Message[PagoExitoso]) -> None:
        handled.append(event.saga_id)
        if replayed is not None:
            replayed.append(event.replayed)

    consumer = EventConsumer(service=SERVICE, topics=["payment-events"],
                             subscriptions=[Subscription(PagoExitoso, allocate)],
                             uow_factory=lambda **_: CommittingUnitOfWork(),
                             settings=MessagingSettings(operator_public_keys=keys),
                             dead_letters=_NoLetters())
    return consumer, handled


def _paid(amount: str = "10.00") -> Envelope:
    return Envelope.new(saga_id=str(uuid.uuid4()), event_type="PagoExitoso",
                        schema_version="1.0.0", source_service="pagos",
                        payload={"order_id": str(uuid.uuid4()),
                                 "payment_id": str(uuid.uuid4()), "charge_id": "ch_1",
                                 "amount": amount, "currency": "USD"})


def _plan(envelope: Envelope, replay_for: str) -> replay.Replay:
    """What ``sagactl replay`` builds of a dead letter of ``envelope``, addressed to
    ``replay_for``, before it signs it."""
    value = json.dumps(envelope.to_dict()).encode()
    letter = dead_letters.build(
        service=replay_for, reason="retries_exhausted", error_class="TransientError",
        attempts=[Attempt(1, "2026-01-01T00:00:00Z", "TransientError('busy')")],
        last_traceback="", saga_id=envelope.saga_id,
        original=Original("payment-events", value, envelope.message_id, envelope.event_type,
                          envelope.saga_id.encode(), list(_headers(envelope.kafka_headers())),
                          0, 7))
    return replay.build(replay.claimed_record(letter.value), replay_for, str(uuid.uuid4()))


def _headers(headers: dict[str, str]) -> list[tuple[str, bytes]]:
    return [(k, v.encode()) for k, v in headers.items()]


def _record(plan: replay.Replay) -> RawRecord:
    """``plan`` as the consumer reads what ``replay.publish`` sends."""
    return RawRecord(plan.topic, 0, 8, plan.record_key(), plan.record_value(),
                     _headers(plan.headers))


def _forged(reason: str) -> float:
    return metrics.FORGED_REPLAYS.labels(SERVICE, reason)._value.get()


async def test_a_signed_replay_for_another_service_is_skipped() -> None:
    consumer, handled = _consumer()
    plan = replay.signed(_plan(_paid(), "pedidos"), OPERATOR)
    before = _forged("invalid_signature") + _forged("unsigned") + _forged("unknown_key")
    assert (await consumer.processor.process(_record(plan))).status == "skipped"
    assert handled == []
    assert _forged("invalid_signature") + _forged("unsigned") + _forged("unknown_key") == before


async def test_a_signed_replay_for_this_service_is_handled() -> None:
    consumer, handled = _consumer()
    paid = _paid()
    plan = replay.signed(_plan(paid, SERVICE), OPERATOR)
    assert (await consumer.processor.process(_record(plan))).status == "processed"
    assert handled == [paid.saga_id]


async def test_only_a_replay_the_operator_signed_for_this_service_reaches_it_as_a_replay(
) -> None:
    """A handler tells a replay by ``Message.replayed`` alone: ``metadata.replay_of`` and
    ``X-Replay-For`` are anyone's to write."""
    replayed: list[bool] = []
    consumer, _ = _consumer(replayed=replayed)
    for plan in (replay.signed(_plan(_paid(), SERVICE), OPERATOR), _plan(_paid(), SERVICE),
                 replay.signed(_plan(_paid(), SERVICE), Ed25519PrivateKey.generate())):
        assert plan.value["metadata"]["replay_of"]
        assert (await consumer.processor.process(_record(plan))).status == "processed"
    assert replayed == [True, False, False]


async def test_an_unsigned_replay_for_this_service_is_handled_and_counted() -> None:
    # The service it names handles it as any record (its inbox still drops a second copy).
    consumer, handled = _consumer()
    paid = _paid()
    before = _forged("unsigned")
    assert (await consumer.processor.process(_record(_plan(paid, SERVICE)))).status \
        == "processed"
    assert handled == [paid.saga_id]
    assert _forged("unsigned") == before + 1


def _unsigned(paid: Envelope) -> tuple[RawRecord, str]:
    return _record(_plan(paid, "pedidos")), "unsigned"


def _signed_by_a_stranger(paid: Envelope) -> tuple[RawRecord, str]:
    return _record(replay.signed(_plan(paid, "pedidos"), Ed25519PrivateKey.generate())), \
        "unknown_key"


def _signature_of_another_record(paid: Envelope) -> tuple[RawRecord, str]:
    other = replay.signed(_plan(_paid(), "pedidos"), OPERATOR)
    plan = _plan(paid, "pedidos")
    moved = replace(plan, headers={**plan.headers,
                                   h.REPLAY_SIGNATURE: other.headers[h.REPLAY_SIGNATURE]})
    return _record(moved), "invalid_signature"


def _value_changed_after_signing(paid: Envelope) -> tuple[RawRecord, str]:
    record = _record(replay.signed(_plan(paid, "pedidos"), OPERATOR))
    assert record.value is not None
    record.value = record.value.replace(b'"10.00"', b'"0.01"')
    return record, "invalid_signature"


def _readdressed_after_signing(paid: Envelope) -> tuple[RawRecord, str]:
    # Signed for pedidos, then addressed to pagos, which does not read payment-events.
    plan = replay.signed(_plan(paid, "pedidos"), OPERATOR)
    return _record(replace(plan, headers={**plan.headers, h.REPLAY_FOR: "pagos"})), \
        "invalid_signature"


def _forged_header(paid: Envelope) -> tuple[RawRecord, str]:
    plan = _plan(paid, "pedidos")
    return _record(replace(plan, headers={**plan.headers,
                                          h.REPLAY_SIGNATURE: "0123456789abcdef:AAAA"})), \
        "unknown_key"


@pytest.mark.parametrize("forged", [
    _unsigned, _signed_by_a_stranger, _signature_of_another_record,
    _value_changed_after_signing, _readdressed_after_signing, _forged_header,
])
async def test_a_replay_the_operator_did_not_sign_hides_nothing(
        forged: Any, caplog: pytest.LogCaptureFixture) -> None:
    consumer, handled = _consumer()
    paid = _paid()
    record, reason = forged(paid)
    before = _forged(reason)
    with caplog.at_level(logging.WARNING, logger="sagakit.consumer"):
        assert (await consumer.processor.process(record)).status == "processed"
    assert handled == [paid.saga_id], "handled as if it had no X-Replay-For"
    assert _forged(reason) == before + 1
    [warning] = [r for r in caplog.records if "not signed by the operator" in r.getMessage()]
    assert reason in warning.getMessage() and "payment-events" in warning.getMessage()


async def test_without_operator_keys_no_replay_is_skipped() -> None:
    consumer, handled = _consumer(keys=None)
    paid = _paid()
    plan = replay.signed(_plan(paid, "pedidos"), OPERATOR)
    assert (await consumer.processor.process(_record(plan))).status == "processed"
    assert handled == [paid.saga_id]


async def test_a_key_being_replaced_and_its_successor_are_both_believed() -> None:
    successor = Ed25519PrivateKey.generate()
    consumer, handled = _consumer(keys=",".join(replay_signature.public_entry(k)
                                                for k in (OPERATOR, successor)))
    for key in (OPERATOR, successor):
        plan = replay.signed(_plan(_paid(), "pedidos"), key)
        assert (await consumer.processor.process(_record(plan))).status == "skipped"
    assert handled == []


async def test_only_records_with_x_replay_for_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_check(*_: Any) -> None:
        raise AssertionError("a record without X-Replay-For was checked for a signature")

    monkeypatch.setattr(OperatorKeys, "forgery", no_check)
    consumer, handled = _consumer()
    paid = _paid()
    record = RawRecord("payment-events", 0, 7, paid.saga_id.encode(),
                       json.dumps(paid.to_dict()).encode(), _headers(paid.kafka_headers()))
    assert (await consumer.processor.process(record)).status == "processed"
    assert handled == [paid.saga_id]


def test_operator_keys_that_cannot_be_read_stop_the_service(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGA_OPERATOR_PUBLIC_KEYS", "0123456789abcdef:not-a-key")
    with pytest.raises(InvalidConfiguration, match="SAGA_OPERATOR_PUBLIC_KEYS"):
        load(MessagingSettings)
