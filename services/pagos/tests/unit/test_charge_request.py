"""The StockVerificado kept with a payment and given back by the dead letter of its charge."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from pagos.domain.payment import Payment, PaymentStatus
from pagos.usecases import charge_request
from saga_harness.events import stock_verificado
from sagakit import jsonio
from sagakit.envelope import Envelope


def _event() -> Envelope:
    """A StockVerificado of one unit at 10.50 EUR, as inventario sends it."""
    return stock_verificado(str(uuid.uuid4()), str(uuid.uuid4()), unit_price="10.50",
                            quantity=1, currency="EUR", customer=None).envelope


def _token(event: Envelope) -> str:
    return str(event.payload["payment_method"]["token"])


def _payment(event: Envelope, **changes: Any) -> Payment:
    values: dict[str, Any] = dict(
        payment_id=str(uuid.uuid4()), saga_id=event.saga_id,
        order_id=event.payload["order_id"], status=PaymentStatus.CHARGING,
        amount=Decimal("10.50"), currency="EUR", token=_token(event), charge_id=None,
        charge_attempts=2, refund_attempts=0, leased=True, trigger_span_id=event.span_id,
        trigger_event=charge_request.kept(event),
        attempt_log=({"kind": "charge", "attempt": 1, "at": "t1", "outcome": "unavailable",
                      "detail": "timeout"},
                     {"kind": "refund", "attempt": 1, "at": "t2", "outcome": "failed",
                      "detail": "not this one"}))
    values.update(changes)
    return Payment(**values)


def test_the_payment_keeps_the_request_without_its_token() -> None:
    event = _event()
    kept = charge_request.kept(event)
    assert kept["payload"]["payment_method"] == {"type": "credit_card"}
    assert _token(event) not in jsonio.dumps(kept)


def test_the_letter_gives_the_request_back_whole_with_every_charge_call() -> None:
    event = _event()
    letter = charge_request.dead_letter(_payment(event), 3, "gateway timed out")
    record = letter.value
    assert letter.topic == "pagos-dlq" and letter.key == event.saga_id
    assert jsonio.loads(record["original"]["value"]["data"]) == event.to_dict()
    assert record["original"]["message_id"] == event.message_id
    assert record["original"]["topic"] == "inventory-events"
    assert [(a["attempt"], a["error"]) for a in record["attempts"]] == [
        (1, "unavailable: timeout"), (3, "gateway timed out")]
    assert record["attempt_count"] == 2


def test_a_payment_that_did_not_keep_its_request_gives_what_it_knows() -> None:
    """A replay of it asks for the missing items (``sagactl replay --payload``)."""
    event = _event()
    letter = charge_request.dead_letter(_payment(event, trigger_event=None), 4, "down")
    request = jsonio.loads(letter.value["original"]["value"]["data"])
    assert request["saga_id"] == event.saga_id and request["event_type"] == "StockVerificado"
    assert request["payload"] == {"order_id": event.payload["order_id"],
                                  "total_amount": "10.50", "currency": "EUR",
                                  "payment_method": {"type": "credit_card",
                                                     "token": _token(event)}}


def test_the_letter_points_a_replay_at_the_record_the_charge_was_asked_in() -> None:
    """The original is rebuilt from what the payment kept: a replay re-reads the record where
    it sat (``sagakit.operations.replay``) and sends that, not this copy."""
    event = _event()
    letter = charge_request.dead_letter(
        _payment(event, trigger_record=("inventory-events", 4, 1234)), 3, "timeout")
    original = letter.value["original"]
    assert (original["topic"], original["partition"], original["offset"]) == (
        "inventory-events", 4, 1234)
    assert original["rebuilt"] is True
    unknown = charge_request.dead_letter(_payment(event), 3, "timeout").value["original"]
    assert unknown["partition"] is None and unknown["offset"] is None
