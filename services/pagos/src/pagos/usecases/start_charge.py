"""StockVerificado → a payment row due for charging now. The gateway call itself happens in the
gateway worker, after this transaction committed (never inside it).

When the worker has a free slot, this transaction also leases the row to it and the call
starts as soon as the commit is through: the lease a separate claim transaction would take,
taken here in the same statement (one transaction less per saga, and the charge no longer
waits for the worker to wake and claim it). A crash after the commit leaves a leased row that
falls due when its lease runs out, exactly as a crash after a claim does. The payment and the
inbox row go in one statement, which is the whole transaction.

A StockVerificado replayed by an operator (``sagactl replay`` of a dead letter: it carries
``metadata.replay_of``) asks for the charge again. For a saga with no payment yet it is the
charge as above. For one whose charge the gateway never answered (CHARGE_FAILED, dead-lettered)
it makes the charge due again with a fresh retry schedule, under the same idempotency key: the
gateway answers the first call's result if that charge was made, and makes it otherwise. A
payment that anything else has decided since (a cancellation, a refund) is left as it is.
"""

from __future__ import annotations

import logging
from decimal import Decimal

from sagakit.consumer import Handler
from sagakit.envelope import Envelope
from sagakit.observability import tracing
from sagakit.store.unit_of_work import UnitOfWork
from sqlalchemy import func

from pagos.adapters.payment_repository import Payment, PaymentRepository
from pagos.domain.payment import PaymentStatus
from pagos.usecases import charge_request
from pagos.usecases.gateway_worker import GatewayWorker

log = logging.getLogger("pagos.start_charge")


def make_on_stock_verificado(worker: GatewayWorker) -> Handler:
    async def on_stock_verificado(uow: UnitOfWork, event: Envelope) -> None:
        p = event.payload
        if event.metadata.get("replay_of") and await _charge_again(uow, event, worker):
            return
        slot = worker.reserve()
        try:
            # The payment, the inbox row and nothing else: one statement, its own transaction.
            uow.stage(PaymentRepository.new_charge(
                saga_id=event.saga_id, order_id=p["order_id"],
                amount=Decimal(p["total_amount"]), currency=p["currency"],
                token=p["payment_method"]["token"],
                lease_s=worker.settings.lease_s if slot else None,
                trigger={"message_id": event.message_id, "event_type": event.event_type,
                         "span_id": event.span_id,
                         "traceparent": tracing.current_traceparent(),
                         "event": charge_request.kept(event)}))
            await uow.commit()
            if not uow.returned:
                # Cancelled before stock was verified, or already charging: never charge twice.
                log.info("charge not started: saga already has a payment",
                         extra={"saga_id": event.saga_id, "event_type": event.event_type})
            elif slot is not None:
                worker.start(slot, Payment.from_row(uow.returned[0], leased=True))
            else:
                worker.kick()
        finally:
            if slot is not None:
                worker.release(slot)  # unused: the transaction did not commit

    return on_stock_verificado


async def _charge_again(uow: UnitOfWork, event: Envelope, worker: GatewayWorker) -> bool:
    """A replayed StockVerificado for a saga that has a payment: the charge made due again if
    the gateway never answered it, nothing otherwise. False when the saga has no payment (the
    replay starts the charge as the original would have)."""
    repo = PaymentRepository(uow.connection)
    payment = await repo.lock(event.saga_id)
    if payment is None:
        return False
    if payment.status is PaymentStatus.CHARGE_FAILED:
        # The charge's idempotency key binds it to the token of its first call: a replay that
        # brings another one would be refused by the gateway and prove nothing. The replay's
        # token is used only when the payment kept none.
        token = payment.token or event.payload["payment_method"]["token"]
        # Under the row lock the status holds: the conditional update applies.
        await repo.update(event.saga_id, PaymentStatus.CHARGE_FAILED,
                          status=PaymentStatus.CHARGING.value, payment_token=token,
                          charge_attempts=0, lease_until=None, next_attempt_at=func.now())
        uow.after_commit(worker.kick)
        log.info("replayed charge due again", extra={
            "saga_id": event.saga_id, "event_type": event.event_type,
            "message_id": event.message_id, "replay_of": event.metadata.get("replay_of")})
    else:
        log.info("replayed charge not made: the payment is %s", payment.status.value,
                 extra={"saga_id": event.saga_id, "event_type": event.event_type,
                        "message_id": event.message_id})
    await uow.commit()
    return True
