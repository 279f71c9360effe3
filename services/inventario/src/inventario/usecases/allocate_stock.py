"""PagoExitoso → StockAsignado | FalloAsignacion: the units taken, once per saga.

The use case decides on what it reads without locks (the lines checked for the saga, its
allocation, the units on hand) and records the allocation with the commit, guarded: when the
units, locked at the commit, no longer agree with the decision (another saga took the last unit
between the read and the lock), or the saga's allocation was recorded meanwhile, nothing is
written, ``commit`` returns False and the consumer handles the message again at once, on what
it reads then: a FalloAsignacion, and the saga's refund. How the read and the guarded write
reach PostgreSQL, in a transaction whose statement timeout lets the write wait for its locks
as long as the lock timeout says: inventario.adapters.stock_repository (ADR 0005).

A saga that holds a live reservation (reserve_then_pay) finds its units there: the allocation
takes them and confirms the reservation, under the same lock and guard. One whose reservation
expired or was released, or that never had one, takes the Check-Then-Pay path: the units on
hand less the live reservations of other sagas, allocated or FalloAsignacion and a refund;
never an oversell (a reservation past its deadline that the expiry job has not marked yet is
then confirmed too, if the allocation takes the units). The reservations counted confirmed
are those the commit statement confirmed: one the job marked EXPIRED meanwhile is not.

Only the payment the saga asked for takes stock: the amount and currency its stock check sent
pagos in StockVerificado. A PagoExitoso of another amount or currency, or for a saga whose
check asked for no payment (stock unavailable, or never checked), writes nothing for the saga:
a warning and ``saga_payment_mismatch_total`` raise the alert. Its inbox row is recorded, as
for any message handled: the refusal is this message's outcome, and handling it again (a
redelivery, a dead letter's replay) could only refuse it again. What it was stays in the log
line and on ``payment-events``. A genuine PagoExitoso always finds its check: pagos charges on
the StockVerificado committed with it, and the check is never changed afterwards, so what
was read cannot go stale before the commit.
"""

from __future__ import annotations

import logging

from inventario import metrics as inventario_metrics
from inventario.domain.payment_match import Money, PaymentMismatch, payment_mismatch
from inventario.domain.stock import (
    AllocationDecision,
    AllocationStatus,
    on_payment_succeeded,
    shortages,
)
from inventario.metrics import ReservationOutcome
from inventario.usecases.event_parts import shortage_parts, stock_lines
from inventario.usecases.ports import StockStore
from saga_contracts.events.inventory import FalloAsignacion, StockAsignado
from saga_contracts.events.payments import PagoExitoso
from sagakit.errors import PermanentError
from sagakit.message import Message
from sagakit.ports import UnitOfWorkPort

log = logging.getLogger("inventario.allocate_stock")
SERVICE = "inventario"


async def allocate_stock(uow: UnitOfWorkPort, stock: StockStore, event: Message[PagoExitoso],
                         *, lock_timeout_ms: int, statement_timeout_ms: int) -> None:
    """``lock_timeout_ms``: how long the allocation may wait for a product another saga holds;
    past it the attempt fails (a transient error: retried with backoff, then dead-lettered)
    instead of holding the consumer forever. ``statement_timeout_ms``: how long its write may
    take, lock waits included; longer than ``lock_timeout_ms``, or the lock timeout would
    never be the one that ends a wait."""
    order_id = event.payload.order_id
    state = await stock.allocation_state(event.saga_id, statement_timeout_ms=statement_timeout_ms)
    paid = Money(event.payload.amount, event.payload.currency)
    mismatch = payment_mismatch(state.payment_requested, paid)
    if mismatch is not None:
        _refuse(uow, event, mismatch, state.payment_requested, paid)
        await uow.commit()
        return
    decision = on_payment_succeeded(state.allocation)
    if decision is AllocationDecision.IGNORE:
        log.info("allocation skipped: saga already %s", state.allocation,
                 extra={"saga_id": event.saga_id, "event_type": event.event_type})
        await uow.commit()
        return
    lines = state.checked
    if lines is None:
        # A check that asked for the payment has its lines: the store broke its promise.
        raise PermanentError(f"no stock validation recorded for saga {event.saga_id}")
    missing = shortages(lines, state.available())
    status = AllocationStatus.FAILED if missing else AllocationStatus.ALLOCATED
    stock.record_allocation(event.saga_id, order_id, status, lines,
                            lock_timeout_ms=lock_timeout_ms)
    if missing:
        uow.emit(FalloAsignacion(order_id=order_id,
                                 reason="race condition: stock consumed after validation",
                                 unavailable=shortage_parts(missing)))
    else:
        uow.emit(StockAsignado(order_id=order_id, items=stock_lines(lines)))
        # The reservations the commit confirmed, as it says: one the expiry job marked
        # EXPIRED after the read is counted there, not here.
        uow.after_commit(lambda: _count_confirmed(stock.reservations_confirmed()))
    # False (nothing written) when the locked units disagree with the decision: the consumer
    # handles the message again (sagakit.consumer, StaleRead).
    await uow.commit()


def _count_confirmed(confirmed: int) -> None:
    if confirmed:
        inventario_metrics.RESERVATIONS.labels(SERVICE, ReservationOutcome.CONFIRMED).inc(
            confirmed)


def _refuse(uow: UnitOfWorkPort, event: Message[PagoExitoso], mismatch: PaymentMismatch,
            requested: Money | None, paid: Money) -> None:
    """Counts and logs, once the inbox row is committed, a payment the saga did not ask for."""
    def counted() -> None:
        inventario_metrics.PAYMENT_MISMATCHES.labels(SERVICE, mismatch.value).inc()
        log.warning("payment event ignored: %s (paid %s %s, requested %s)", mismatch.value,
                    paid.amount, paid.currency,
                    f"{requested.amount} {requested.currency}" if requested else "nothing",
                    extra={"saga_id": event.saga_id, "event_type": event.event_type,
                           "reason": mismatch.value})
    uow.after_commit(counted)
