"""Runs the payment work that is due: charges, resolutions of cancelled charges, refunds.

Waiting is a row: each payment with work has ``next_attempt_at``. The worker leases due rows
(so two workers never call the gateway for the same payment at once; a new charge comes leased
already from the transaction that created it when a slot was free, see ``reserve``), calls
the gateway with no transaction open, then records the outcome in one unit of work: the new
status, the next attempt time with its jitter already applied, and the outcome event in the
outbox. A crash at any point leaves a row that is due again once its lease expires; the
gateway's idempotency keys (derived from the saga id) make the repeated call harmless.

This module is the worker's loop and its slots (how many calls at once, and which start
where); a call and its outcome are ``charge_payment``'s and ``refund_payment``'s, which record
pagos' own failures around a call as its unknown outcome (``call_outcome``). What even that
could not record (the database out of reach) is logged and counted here, and the call is made
again when its lease runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from opentelemetry.trace import SpanKind

from pagos.config import PagosSettings
from pagos.domain import payment as domain
from pagos.domain.payment import Payment
from pagos.metrics import GatewayCall, Stage
from pagos.usecases import call_outcome
from pagos.usecases.charge_payment import charge_payment
from pagos.usecases.ports import PaymentGateway, PaymentTokenOpener, PaymentUnits, Slot
from pagos.usecases.refund_payment import refund_payment
from sagakit.observability import tracing

log = logging.getLogger("pagos.gateway_worker")

# Wake a little after the work falls due, not a hair before it.
_MARGIN_S = 0.02


class GatewayWorker:
    def __init__(self, units: PaymentUnits, gateway: PaymentGateway, settings: PagosSettings,
                 tokens: PaymentTokenOpener) -> None:
        self.units = units
        self.gateway = gateway
        self.settings = settings
        self.tokens = tokens
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

    @property
    def lease_s(self) -> float:
        """How long a gateway call holds its payment."""
        return self.settings.lease_s

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
        # ``attempt`` handles every Exception: what ends one otherwise (a BaseException) is
        # said, not left for the garbage collector to mention.
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("gateway attempt ended by %s", type(exc).__name__)
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
        async with self.units() as (uow, payments):
            due = await payments.claim_due(free, self.settings.lease_s)
            if not due:
                next_due_s = await payments.seconds_to_next_due()
            await uow.commit()
        if len(due) == free:
            self._slot_wanted = True  # every slot taken: more may be due already
        for payment in due:
            self._spawn(payment)
        return len(due), next_due_s

    async def attempt(self, payment: Payment) -> None:
        # The saga's trace goes on from the StockVerificado that asked for this payment.
        refund = payment.status is domain.PaymentStatus.REFUNDING
        call = GatewayCall.REFUND if refund else GatewayCall.CHARGE
        with tracing.span(
                f"gateway {call.value}",
                traceparent=payment.trigger_traceparent, kind=SpanKind.CLIENT,
                attributes=tracing.attributes(id=payment.saga_id,
                                              attempt=_attempts_before(payment) + 1)):
            try:
                if refund:
                    await refund_payment(self.units, self.gateway, self.settings, payment,
                                         self.kick)
                else:
                    await charge_payment(self.units, self.gateway, self.settings, payment,
                                         self.kick, tokens=self.tokens)
            except Exception as exc:
                # Not even the call's unknown outcome could be recorded (the database out of
                # reach, say): the lease runs out and the call is made again, each time
                # logged and counted, until its outcome is recorded.
                call_outcome.failure(call, Stage.UNRECORDED, exc, payment)


def _attempts_before(payment: Payment) -> int:
    """The calls ``payment``'s next call follows, in the budget it counts against."""
    if payment.status is domain.PaymentStatus.REFUNDING:
        return payment.refund_attempts
    if payment.status is domain.PaymentStatus.CANCEL_REQUESTED:
        return payment.resolve_attempts
    return payment.charge_attempts
