"""StockVerificado → a payment row due for charging now. The gateway call itself happens in the
gateway worker, after this transaction committed (never inside it).

When the worker has a free slot, this transaction also leases the row to it and the call
starts as soon as the commit is through: the lease a separate claim transaction would take,
taken here in the same statement (one transaction less per saga, and the charge no longer
waits for the worker to wake and claim it). A crash after the commit leaves a leased row that
falls due when its lease runs out, exactly as a crash after a claim does. The payment and the
inbox row go in one statement, which is the whole transaction.

A StockVerificado replayed by an operator (``sagactl replay`` of a dead letter, signed with the
operator's key for pagos: ``Message.replayed``; the envelope's ``metadata.replay_of`` is only
the sender's word, and anyone who can write the topic can write it) asks for the charge again.
For a saga with no payment yet it is the charge as above. For one whose charge the gateway
never answered (CHARGE_FAILED, dead-lettered) it makes the charge due again with a fresh retry
schedule, under the same idempotency key: the gateway answers the first call's result if that
charge was made, and makes it otherwise. A payment that anything else has decided since (a
cancellation, a refund) is left as it is.
"""

from __future__ import annotations

import logging

from pagos.domain.payment import PaymentStatus
from pagos.usecases import charge_request
from pagos.usecases.customer import customer_of
from pagos.usecases.ports import ChargeCalls, PaymentStore
from saga_contracts.events.inventory import StockVerificado
from sagakit.message import Message
from sagakit.observability import tracing
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("pagos.start_charge")


async def start_charge(uow: UnitOfWorkPort, payments: PaymentStore, calls: ChargeCalls,
                       event: Message[StockVerificado]) -> None:
    p = event.payload
    if event.replayed and await _charge_again(uow, payments, calls, event):
        return
    slot = calls.reserve()
    try:
        # The payment, the inbox row and nothing else: one statement, its own transaction.
        payments.new_charge(
            saga_id=event.saga_id, order_id=p.order_id, customer_id=customer_of(event),
            amount=p.total_amount,
            currency=p.currency, token=p.payment_method.token,
            lease_s=calls.lease_s if slot else None,
            trigger={"message_id": event.message_id, "event_type": event.event_type,
                     "span_id": event.span_id,
                     "traceparent": tracing.current_traceparent(),
                     # Where the event sat on Kafka: a dead letter of the charge points the
                     # replay at it (sagakit.operations.replay re-reads it from there).
                     "record": list(event.address) if event.address else None,
                     "event": charge_request.kept(event.envelope)})
        await uow.commit()
        created = payments.created()
        if created is None:
            # Cancelled before stock was verified, or already charging: never charge twice.
            log.info("charge not started: saga already has a payment",
                     extra={"saga_id": event.saga_id, "event_type": event.event_type})
        elif slot is not None:
            calls.start(slot, created)
        else:
            calls.kick()
    finally:
        if slot is not None:
            calls.release(slot)  # unused: the transaction did not commit


async def _charge_again(uow: UnitOfWorkPort, payments: PaymentStore, calls: ChargeCalls,
                        event: Message[StockVerificado]) -> bool:
    """A replayed StockVerificado for a saga that has a payment: the charge made due again if
    the gateway never answered it, nothing otherwise. False when the saga has no payment (the
    replay starts the charge as the original would have)."""
    payment = await payments.lock(event.saga_id)
    if payment is None:
        return False
    if payment.status is PaymentStatus.CHARGE_FAILED:
        # The charge's idempotency key binds it to the token of its first call: a replay that
        # brings another one would be refused by the gateway and prove nothing. The replay's
        # token is used only when the payment kept none.
        token = payment.token or event.payload.payment_method.token
        # Under the row lock the status holds: the conditional update applies.
        await payments.charge_again(event.saga_id, token)
        uow.after_commit(calls.kick)
        log.info("replayed charge due again", extra={
            "saga_id": event.saga_id, "event_type": event.event_type,
            "message_id": event.message_id, "replay_of": event.metadata.get("replay_of")})
    else:
        log.info("replayed charge not made: the payment is %s", payment.status.value,
                 extra={"saga_id": event.saga_id, "event_type": event.event_type,
                        "message_id": event.message_id})
    await uow.commit()
    return True
