"""The StockVerificado that asked for a charge: kept with the payment, and parked whole in a
dead letter when the charge is given up on.

The payment keeps the event without its payment token (``trigger.event``): the token, sealed as
pedidos sealed it, is the payment's own column, cleared once no call needs it, and kept nowhere
else. A dead letter of the charge gives the event back as it came, its token still sealed, in
the dead-letter format of every service (``sagakit.dead_letters``): ``sagactl replay`` sends it
to pagos again under a new message id, and the charge is made due again (``start_charge``).
"""

from __future__ import annotations

import uuid
from dataclasses import fields
from typing import Any

from pagos.domain.payment import Payment
from saga_contracts import registry
from sagakit import dead_letters, jsonio
from sagakit.dead_letters import Attempt, DeadLetter, Original
from sagakit.envelope import Envelope, new_message_id, utc_now_iso

EVENT_TYPE = "StockVerificado"
SERVICE = "pagos"
_ENVELOPE_FIELDS = frozenset(f.name for f in fields(Envelope))


def kept(event: Envelope) -> dict[str, Any]:
    """The event as the payment keeps it: without the payment token."""
    method = {k: v for k, v in event.payload["payment_method"].items() if k != "token"}
    return {**event.to_dict(), "payload": {**event.payload, "payment_method": method}}


def request_of(payment: Payment) -> Envelope:
    """The event that asked for ``payment``'s charge, token included. A payment that did not
    keep it (created before payments kept it) gives what it knows: an event without its
    items, which a replay asks to be completed (``sagactl replay --payload``)."""
    if payment.trigger_event is not None:
        event = dict(payment.trigger_event)
        payload = dict(event["payload"])
    else:
        schema = registry.latest(EVENT_TYPE)
        event = {"message_id": new_message_id(), "saga_id": payment.saga_id,
                 "span_id": payment.trigger_span_id or str(uuid.uuid4()), "parent_span_id": None,
                 "schema_version": schema.version, "timestamp": utc_now_iso(),
                 "source_service": "inventario", "event_type": EVENT_TYPE, "metadata": {}}
        payload = {"order_id": payment.order_id, "currency": payment.currency,
                   "total_amount": None if payment.amount is None else f"{payment.amount:.2f}",
                   "payment_method": {"type": "credit_card"}}
    method = dict(payload.get("payment_method") or {})
    if payment.token is not None:
        method["token"] = payment.token
    event["payload"] = {**payload, "payment_method": method}
    return Envelope(**{k: v for k, v in event.items() if k in _ENVELOPE_FIELDS})


def dead_letter(payment: Payment, attempts: int, detail: str) -> DeadLetter:
    """The dead letter of a charge the gateway never made after ``attempts`` calls, the last
    one answering ``detail``: every charge call of the payment's log, and the request."""
    request = request_of(payment)
    tried = [Attempt(int(a.get("attempt", 0)), str(a.get("at", "")),
                     f"{a.get('outcome')}: {a.get('detail')}")
             for a in payment.attempt_log if a.get("kind") == "charge"]
    tried.append(Attempt(attempts, utc_now_iso(), detail or "no detail"))
    # The record the event came in, when the payment kept where it sat: a replay re-reads it
    # from Kafka and sends it, not this rebuilt copy (sagakit.operations.replay).
    topic, partition, offset = payment.trigger_record or (registry.topic_of(EVENT_TYPE), None,
                                                          None)
    original = Original(
        topic=topic, value=jsonio.dumpb(request.to_dict()),
        message_id=request.message_id, event_type=EVENT_TYPE,
        key=payment.saga_id.encode(),
        headers=[(k, v.encode()) for k, v in
                 request.kafka_headers(payment.trigger_traceparent).items()],
        partition=partition, offset=offset)
    return dead_letters.build(service=SERVICE, reason="gateway_retries_exhausted",
                              error_class="GatewayUnavailable", attempts=tried,
                              last_traceback=f"GatewayUnavailable: {detail}", original=original,
                              saga_id=payment.saga_id, rebuilt=True)
