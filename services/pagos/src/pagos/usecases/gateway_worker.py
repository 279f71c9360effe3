"""Runs the payment work that is due: charges, resolutions of cancelled charges, refunds.

Waiting is a row: each payment with work has ``next_attempt_at``. The worker leases due rows
(so two workers never call the gateway for the same payment at once; a new charge comes leased
already from the transaction that created it when a slot was free, see ``reserve``), calls
the gateway with no transaction open, then records the outcome in one unit of work: the new
status, the next attempt time with its jitter already applied, and the outcome event in the
outbox. A crash at any point leaves a row that is due again once its lease expires; the
gateway's idempotency keys (derived from the saga id) make the repeated call harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import SpanKind
from sagakit.envelope import utc_now_iso
from sagakit.observability import metrics, tracing
from sagakit.store.unit_of_work import UnitOfWork

from pagos.adapters.gateway_client import GatewayClient
from pagos.adapters.payment_repository import Payment, PaymentRepository
from pagos.config import PagosSettings
from pagos.domain import payment as domain
from pagos.usecases import charge_request

log = logging.getLogger("pagos.gateway_worker")
SERVICE = "pagos"


def charge_key(saga_id: str) -> str:
    return f"charge-{saga_id}"


def refund_key(saga_id: str) -> str:
    return f"refund-{saga_id}"


# Wake a little after the work falls due, not a hair before it.
_MARGIN_S = 0.02

# How many times an outcome is decided again when the payment moved under it (a cancellation
# arriving while the call was in flight moves it once).
_RECORD_TRIES = 5


def jittered(seconds: float) -> float:
    return seconds * (1 + random.uniform(-0.2, 0.2))


def _retry_in(change: domain.Change) -> float | None:
    # The jitter is decided now and stored, so a restart retries at the same instant.
    return None if change.retry_in_s is None else jittered(change.retry_in_s)


def _schedules(change: domain.Change) -> bool:
    """Whether the outcome decides the payment's next work. One that changes nothing (the
    payment moved on while the call was in flight) leaves it to whatever moved it: a refund
    scheduled by a concurrent outcome must stay due."""
    return change.status is not None or change.retry_in_s is not None


def _status_values(change: domain.Change) -> dict[str, Any]:
    """The columns a new status sets: the token kept only while the charge may still have to be
    made or replayed, the manual-refund mark where finance must step in."""
    if change.status is None:
        return {}
    values: dict[str, Any] = {"status": change.status.value}
    if change.status not in domain.TOKEN_NEEDED:
        values["payment_token"] = None
    if domain.manual_refund_required(change.status):
        values["manual_refund_required"] = True
    return values


@dataclass
class Slot:
    """One gateway call's place in the worker's concurrency, reserved before a transaction that
    leases new work; ``GatewayWorker.start`` uses it, ``GatewayWorker.release`` gives it back
    unused."""

    held: bool = True


class GatewayWorker:
    def __init__(self, uow_factory: Callable[..., UnitOfWork], gateway: GatewayClient,
                 settings: PagosSettings) -> None:
        self.uow_factory = uow_factory
        self.gateway = gateway
        self.settings = settings
        self._wake = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._reserved = 0
        self._active = False
        # Due work may be waiting for a slot (every slot was taken when it was created or
        # looked for): the next slot freed looks for it at once, not at the next poll.
        self._slot_wanted = False

    def kick(self) -> None:
        """New work may be due now (a payment created, a retry scheduled, a slot freed)."""
        self._wake.set()

    def _free_slots(self) -> int:
        return self.settings.worker_concurrency - len(self._running) - self._reserved

    def reserve(self) -> Slot | None:
        """A gateway slot for work about to be created already leased (see ``start_charge``):
        the transaction that creates a charge leases it, and ``start`` begins the call right
        after its commit, without a transaction of its own to claim the row. None when every
        slot is taken or this instance runs no worker: the work is then created due now and
        unleased, for whichever worker claims it first."""
        if not self._active:
            return None
        if self._free_slots() <= 0:
            self._slot_wanted = True
            return None
        self._reserved += 1
        return Slot()

    def start(self, slot: Slot, payment: Payment) -> None:
        """Begins the gateway call for ``payment``, leased by the transaction that just
        committed, in the slot reserved for it."""
        self._unreserve(slot)
        self._spawn(payment)

    def release(self, slot: Slot) -> None:
        """Gives a reserved slot back unused (its transaction did not commit); a no-op once
        the slot was used."""
        if self._unreserve(slot):
            self._slot_freed()

    def _unreserve(self, slot: Slot) -> bool:
        if not slot.held:
            return False
        slot.held = False
        self._reserved -= 1
        return True

    def _spawn(self, payment: Payment) -> None:
        task = asyncio.create_task(self.attempt(payment))
        self._running.add(task)
        task.add_done_callback(self._attempt_done)

    def _attempt_done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._slot_freed()

    def _slot_freed(self) -> None:
        if self._slot_wanted:
            self._slot_wanted = False  # run_due sets it again if it fills every slot
            self.kick()

    async def run(self, stop: asyncio.Event) -> None:
        # Between kicks the worker sleeps until the earliest work it knows of falls due, and at
        # most worker_poll_interval_s (work created by another instance, a lease run out).
        self._active = True
        try:
            await self._run(stop)
        finally:
            self._active = False

    async def _run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            wait_s = self.settings.worker_poll_interval_s
            try:
                _, next_due_s = await self.run_due()
                if next_due_s is not None:
                    wait_s = min(wait_s, next_due_s + _MARGIN_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("gateway worker tick failed", exc_info=True)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait_s)
            self._wake.clear()
        if self._running:
            await asyncio.wait(self._running, timeout=5)

    async def run_due(self) -> tuple[int, float | None]:
        """Leases and starts the due work; returns how many and, when none was due, how long
        until the next falls due (None: nothing scheduled)."""
        free = self._free_slots()
        if free <= 0:
            self._slot_wanted = True
            return 0, None
        next_due_s = None
        async with self.uow_factory() as uow:
            repo = PaymentRepository(uow.connection)
            due = await repo.claim_due(free, self.settings.lease_s)
            if not due:
                next_due_s = await repo.seconds_to_next_due()
            await uow.commit()
        if len(due) == free:
            self._slot_wanted = True  # every slot taken: more may be due already
        for payment in due:
            self._spawn(payment)
        return len(due), next_due_s

    async def attempt(self, payment: Payment) -> None:
        # The saga's trace goes on from the StockVerificado that asked for this payment.
        refund = payment.status is domain.PaymentStatus.REFUNDING
        with tracing.span(
                f"gateway {'refund' if refund else 'charge'}",
                traceparent=payment.trigger_traceparent, kind=SpanKind.CLIENT,
                attributes=tracing.attributes(id=payment.saga_id,
                                              attempt=(payment.refund_attempts if refund
                                                       else payment.charge_attempts) + 1)):
            if refund:
                await self._refund(payment)
            else:
                await self._charge(payment)

    # ------------------------------------------------------------------ charge

    async def _charge(self, payment: Payment) -> None:
        assert payment.amount is not None and payment.currency is not None
        if payment.token is None:
            # Nothing to call (or replay) the charge with: the gateway is not asked, and an
            # outcome that was unknown stays unknown (domain.after_charge: manual refund).
            result_outcome, charge_id, decline, detail = domain.Outcome.NOT_ASKED, None, None, \
                "no payment token"
        else:
            marked = await self._mark_sent(payment)
            if marked is None:
                log.info("charge not sent: the payment has no charge work left, or the lease "
                         "ran out", extra={"saga_id": payment.saga_id})
                return
            result = await self.gateway.charge(
                amount_minor=domain.to_minor_units(payment.amount),
                currency=payment.currency.lower(), token=payment.token,
                idempotency_key=charge_key(payment.saga_id), saga_id=payment.saga_id)
            payment = marked  # a cancellation may have turned it into a resolution
            result_outcome, charge_id, decline, detail = (result.outcome, result.charge_id,
                                                         result.decline_code, result.detail)
        at = utc_now_iso()

        def record(uow: UnitOfWork, current: Payment) -> None:
            attempts_made = current.charge_attempts + 1
            attempt = {"kind": "charge", "attempt": attempts_made, "at": at,
                       "outcome": result_outcome.value, "detail": detail}
            change = domain.after_charge(current.status, result_outcome, attempts_made,
                                         self.settings.charge_retry_schedule_s,
                                         self.settings.resolve_attempts)
            values: dict[str, Any] = {"charge_attempts": attempts_made}
            if charge_id:
                values["charge_id"] = charge_id
            if decline:
                values["decline_code"] = decline
            values.update(_status_values(change))
            uow.stage(PaymentRepository.outcome(
                current, attempt=attempt,
                lease_until=payment.lease_until, schedules=_schedules(change),
                retry_in_s=_retry_in(change), **values))
            if change.emit is domain.Emit.PAGO_EXITOSO:
                uow.emit("PagoExitoso", {
                    "order_id": current.order_id, "payment_id": current.payment_id,
                    "charge_id": charge_id, "amount": f"{current.amount:.2f}",
                    "currency": current.currency}, saga_id=payment.saga_id,
                    parent_span_id=current.trigger_span_id)
            elif change.emit is domain.Emit.PAGO_RECHAZADO:
                uow.emit("PagoRechazado", {
                    "order_id": current.order_id, "payment_id": current.payment_id,
                    "decline_code": decline or "rejected", "reason": detail or "declined"},
                    saga_id=payment.saga_id, parent_span_id=current.trigger_span_id)
            elif change.emit is domain.Emit.FALLO_REEMBOLSO:
                self._emit_refund_failed(uow, current, attempts_made, detail)
            if change.dead_letter:
                self._dead_letter(uow, current, attempts_made, detail)
            self._after(uow, change, current)

        await self._record(payment, record)

    async def _mark_sent(self, payment: Payment) -> Payment | None:
        """Re-checks the payment right before its charge call leaves, and marks it as maybe
        charged from then on (``PaymentRepository.mark_charge_sent``): a cancellation that
        landed after the lease but before this drops the charge and no call is sent."""
        async with self.uow_factory(reads_outside_transaction=True) as uow:
            return await PaymentRepository(uow.connection).mark_charge_sent(payment)

    # ------------------------------------------------------------------ refund

    async def _refund(self, payment: Payment) -> None:
        assert payment.amount is not None
        if payment.charge_id is None:
            succeeded, refund_id, detail = False, None, "no charge id to refund"
        else:
            result = await self.gateway.refund(charge_id=payment.charge_id,
                                               amount_minor=domain.to_minor_units(payment.amount),
                                               idempotency_key=refund_key(payment.saga_id))
            succeeded, refund_id, detail = result.succeeded, result.refund_id, result.detail
        at = utc_now_iso()

        def record(uow: UnitOfWork, current: Payment) -> None:
            attempts_made = current.refund_attempts + 1
            attempt = {"kind": "refund", "attempt": attempts_made, "at": at,
                       "outcome": "refunded" if succeeded else "failed", "detail": detail}
            change = domain.after_refund(current.status, succeeded, attempts_made,
                                         self.settings.refund_retry_schedule_s)
            values: dict[str, Any] = {"refund_attempts": attempts_made}
            values.update(_status_values(change))
            if change.status is domain.PaymentStatus.REFUNDED:
                values.update(refund_id=refund_id, amount_refunded=current.amount)
            uow.stage(PaymentRepository.outcome(
                current, attempt=attempt,
                lease_until=payment.lease_until, schedules=_schedules(change),
                retry_in_s=_retry_in(change), **values))
            if change.emit is domain.Emit.REEMBOLSO_EJECUTADO:
                uow.emit("ReembolsoEjecutado", {
                    "order_id": current.order_id, "payment_id": current.payment_id,
                    "refund_id": refund_id, "amount": f"{current.amount:.2f}",
                    "currency": current.currency}, saga_id=payment.saga_id)
                uow.after_commit(lambda: metrics.COMPENSATIONS.labels(SERVICE, "refund").inc())
            elif change.emit is domain.Emit.FALLO_REEMBOLSO:
                self._emit_refund_failed(uow, current, attempts_made, detail)
            self._after(uow, change, current)

        await self._record(payment, record)

    # ------------------------------------------------------------------ helpers

    async def _record(self, called_for: Payment,
                      record: Callable[[UnitOfWork, Payment], None]) -> None:
        """Writes a gateway call's outcome, decided by ``record`` on the payment.

        It is decided first on the payment as the worker leased it for the call, and written
        with the commit statement, guarded by the status it was decided on: one round trip and
        no transaction held open, where a locked read-decide-write took five (BEGIN, lock,
        update, commit statement, COMMIT) on every saga's critical path. If a cancellation
        moved the payment meanwhile, nothing was written, and the outcome is decided again on
        the payment read as it is now, as a lock would have made it wait and then decide."""
        current: Payment | None = called_for
        for _ in range(_RECORD_TRIES):
            async with self.uow_factory(reads_outside_transaction=True) as uow:
                if current is None:
                    current = await PaymentRepository(uow.connection).read(called_for.saga_id)
                    assert current is not None
                record(uow, current)
                if await uow.commit():
                    return
                current = None
        # Moved under every try: leave it leased. When the lease runs out the call is made
        # again, under the same idempotency key, and its outcome recorded then.
        log.warning("gateway outcome not recorded: the payment kept changing",
                    extra={"saga_id": called_for.saga_id, "attempt": _RECORD_TRIES})

    def _after(self, uow: UnitOfWork, change: domain.Change, payment: Payment) -> None:
        if change.retry_in_s is not None:
            uow.after_commit(self.kick)
        if change.alert:
            severity = "critical"
            uow.after_commit(lambda: metrics.ALERTS.labels(SERVICE, change.alert,
                                                           severity).inc())
            log.critical("payment alert: %s", change.alert,
                         extra={"saga_id": payment.saga_id, "status": "FAILED",
                                "alert": change.alert, "severity": severity})

    def _emit_refund_failed(self, uow: UnitOfWork, payment: Payment, attempts: int,
                            detail: str) -> None:
        uow.emit("FalloReembolso", {
            "order_id": payment.order_id, "payment_id": payment.payment_id,
            "reason": detail or "refund failed", "attempts": attempts}, saga_id=payment.saga_id)

    def _dead_letter(self, uow: UnitOfWork, payment: Payment, attempts: int, detail: str) -> None:
        """The charge could not be made after every retry: park it for an operator, with the
        StockVerificado that asked for it (``sagactl replay`` asks for the charge again)."""
        charge_request.dead_letter(payment, attempts, detail).emit(uow)
