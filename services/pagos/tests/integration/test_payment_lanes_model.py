"""pagos' real handlers and gateway worker, on the real PostgreSQL, driven by Hypothesis through
every interleaving of the lanes that can touch one saga's payment at once.

The lanes: StockVerificado's handler (it creates the charge), OrdenCancelada's and
FalloAsignacion's handlers (each can be stopped right after its row lock found what it found,
while the other lanes move on), and any number of gateway calls. A call's fate is chosen when
the machine answers it: approved, declined, never arrived, or made with its reply lost; a
worker can die with its call in flight, and a lease can run out. The gateway is a model that
keeps the real one's promise (a charge at most once per idempotency key, replays answer what
the first call did) and whose ledger is the judge.

Once every lane has finished and the worker has no work left, the money must be right: a
payment whose order was cancelled, or whose allocation failed, has no charge standing at the
gateway unless it is marked for a manual refund; no charge is ever made twice; nothing is
refunded that was not charged; a charge that stands is a CAPTURED payment of an order that
was neither cancelled nor failed to allocate.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos.adapters.payment_repository import PaymentRepository
from pagos.domain.payment import Outcome, Payment
from pagos.usecases.gateway_worker import GatewayWorker
from pagos.usecases.ports import ChargeResult, RefundResult
from saga_harness import db
from saga_harness import events as ev
from saga_harness import payments as pay
from saga_harness.waiting import wait_for
from sagakit.errors import TransientError
from sagakit.store.tables import MessagingTables

SCHEMA = "paymentlanes"
EXAMPLES = int(os.environ.get("PAYMENT_LANES_EXAMPLES", "60"))
STEPS = int(os.environ.get("PAYMENT_LANES_STEPS", "12"))
MAX_LANES = 8
T = TypeVar("T")
FATES = ["approved", "declined", "never_arrived", "reply_lost"]
# Retries due at once: the machine, not the clock, decides when the worker looks again.
_SETTINGS = pay.settings(resolve_attempts=3, charge_retry_schedule_s=(0.0, 0.0),
                         refund_retry_schedule_s=(0.0, 0.0))


class _Loop:
    """An event loop in a thread of its own: Hypothesis' rules are synchronous, and the lanes
    they start must go on running between rules."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class _Call:
    key: str
    answer: asyncio.Future[str]
    task: asyncio.Task[Any] | None


@dataclass
class ModelGateway:
    """Every charge call waits for the machine to choose its fate; refunds answer at once."""

    loop: asyncio.AbstractEventLoop
    charges: dict[str, str] = field(default_factory=dict)
    declined: set[str] = field(default_factory=set)
    """Keys whose first call was declined: a replay answers the decline again."""
    refunds: dict[str, str] = field(default_factory=dict)
    pending: list[_Call] = field(default_factory=list)
    answer_now: bool = False
    """Settling: every call is approved (or answered as replayed) at once."""

    async def charge(self, *, amount_minor: int, currency: str, token: str,
                     idempotency_key: str, saga_id: str) -> ChargeResult:
        if self.answer_now:
            fate = "approved"
        else:
            call = _Call(idempotency_key, self.loop.create_future(), asyncio.current_task())
            self.pending.append(call)
            fate = await call.answer
        return self.resolve(idempotency_key, fate)

    def resolve(self, key: str, fate: str) -> ChargeResult:
        if fate == "never_arrived":
            return ChargeResult(Outcome.UNAVAILABLE, detail="timed out")
        made = self.charges.get(key)
        if key in self.declined or (made is None and fate == "declined"):
            self.declined.add(key)
            return ChargeResult(Outcome.DECLINED, decline_code="card_declined")
        if made is None:
            made = self.charges[key] = f"ch_{uuid.uuid4().hex[:12]}"
        if fate == "reply_lost":
            return ChargeResult(Outcome.UNAVAILABLE, detail="reply lost")
        return ChargeResult(Outcome.APPROVED, charge_id=made)  # or the replay of the first

    async def refund(self, *, charge_id: str, amount_minor: int,
                     idempotency_key: str) -> RefundResult:
        if charge_id not in self.charges.values():
            return RefundResult(False, detail="no such charge")
        return RefundResult(True, refund_id=self.refunds.setdefault(
            charge_id, f"re_{uuid.uuid4().hex[:12]}"))

    async def close(self) -> None:
        return None


class _Pauses:
    """Stops a compensation handler right after its row lock, until released."""

    def __init__(self) -> None:
        self.wanted: dict[str, asyncio.Event] = {}
        self.reached: dict[str, asyncio.Event] = {}

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = PaymentRepository.lock

        async def lock(repo: PaymentRepository, saga_id: str) -> Payment | None:
            found = await original(repo, saga_id)
            lane = asyncio.current_task()
            name = lane.get_name() if lane else ""
            if name in self.wanted:
                self.reached[name].set()
                await self.wanted.pop(name).wait()
            return found

        monkeypatch.setattr(PaymentRepository, "lock", lock)


class PaymentLanes(RuleBasedStateMachine):
    env: tuple[_Loop, AsyncEngine, MessagingTables, _Pauses]

    @initialize()
    def start(self) -> None:
        self.loop, self.engine, self.tables, self.pauses = self.env
        self.saga_id, self.order_id = str(uuid.uuid4()), str(uuid.uuid4())
        self.gateway = ModelGateway(self.loop.loop)
        self.workers: list[GatewayWorker] = []
        self.lanes: list[asyncio.Task[None]] = []
        self.events: dict[str, Any] = {}
        self.paused: list[tuple[str, asyncio.Event]] = []
        self.compensated = False
        self.stock_verified = False

    # ---- the lanes

    def _worker(self) -> GatewayWorker:
        worker = pay.worker(self.engine, self.tables, self.gateway, _SETTINGS)
        self.workers.append(worker)
        return worker

    def _deliver(self, event: Any, pause: bool) -> None:
        """Starts the event's handler as a lane of its own; with ``pause``, it stops right
        after its row lock until ``release_a_paused_lane``."""
        async def start() -> None:
            name = f"lane-{uuid.uuid4().hex[:8]}"
            if pause:
                release = asyncio.Event()
                self.pauses.wanted[name], self.pauses.reached[name] = release, asyncio.Event()
                self.paused.append((name, release))
            self.events[name] = event
            self.lanes.append(asyncio.create_task(
                pay.deliver(self.engine, self.tables, self._worker(), event), name=name))

        self.loop.run(start())
        self._let_run()

    async def _finished(self, lane: asyncio.Task[None]) -> None:
        try:
            await asyncio.wait_for(lane, 20)
        except Exception as exc:
            # A handler that lost a race raises a transient error; the consumer would deliver
            # the message again: so does this model.
            if not isinstance(exc, TransientError):
                raise
            await self._finished(asyncio.create_task(pay.deliver(
                self.engine, self.tables, self._worker(), self.events[lane.get_name()]),
                name=lane.get_name()))

    @precondition(lambda self: not self.stock_verified)
    @rule()
    def stock_verificado(self) -> None:
        self.stock_verified = True
        self._deliver(ev.stock_verificado(self.saga_id, self.order_id), pause=False)

    def _room_for_a_lane(self) -> bool:
        # Each lane in flight holds a pooled connection: more of them than the pool holds would
        # wait for a connection, not for the database. Counted as started (not as still
        # running) so that the rules Hypothesis may choose do not depend on timing.
        return len(self.lanes) < MAX_LANES

    @precondition(lambda self: self._room_for_a_lane())
    @rule(pause=st.booleans())
    def orden_cancelada(self, pause: bool) -> None:
        self.compensated = True
        self._deliver(ev.orden_cancelada(self.saga_id, self.order_id), pause)

    @precondition(lambda self: bool(self.gateway.charges) and self._room_for_a_lane())
    @rule(pause=st.booleans())
    def fallo_asignacion(self, pause: bool) -> None:
        self.compensated = True
        self._deliver(ev.fallo_asignacion(self.saga_id, self.order_id), pause)

    @precondition(lambda self: bool(self.paused))
    @rule(which=st.integers(min_value=0))
    def release_a_paused_lane(self, which: int) -> None:
        _, release = self.paused.pop(which % len(self.paused))
        self.loop.loop.call_soon_threadsafe(release.set)
        self._let_run()

    # ---- the worker and the network

    @rule()
    def worker_claims_due_work(self) -> None:
        self.loop.run(self._worker().run_due())
        self._let_run()

    @precondition(lambda self: bool(self.gateway.pending))
    @rule(which=st.integers(min_value=0), fate=st.sampled_from(FATES))
    def answer_a_call(self, which: int, fate: str) -> None:
        call = self.gateway.pending.pop(which % len(self.gateway.pending))
        self.loop.loop.call_soon_threadsafe(call.answer.set_result, fate)
        self._let_run()

    @precondition(lambda self: bool(self.gateway.pending))
    @rule(which=st.integers(min_value=0), arrived=st.booleans())
    def a_worker_dies_mid_call(self, which: int, arrived: bool) -> None:
        """The call's worker is gone: the call reached the gateway or not, nobody hears."""
        call = self.gateway.pending.pop(which % len(self.gateway.pending))
        if arrived:
            self.gateway.resolve(call.key, "approved")

        async def die() -> None:
            if call.task is not None:
                call.task.cancel()
            call.answer.cancel()
        self.loop.run(die())
        self._lease_runs_out()

    @precondition(lambda self: self._room_for_a_lane())
    @rule()
    def a_lease_runs_out(self) -> None:
        self._lease_runs_out()

    def _lease_runs_out(self) -> None:
        # As a lane: it waits for a row lock a paused lane may hold, like time would not.
        async def start() -> None:
            self.lanes.append(asyncio.create_task(
                pay.expire_lease(self.engine, SCHEMA, self.saga_id),
                name=f"lease-{uuid.uuid4().hex[:8]}"))
        self.loop.run(start())
        self._let_run()

    def _let_run(self) -> None:
        """Waits until everything released has run as far as it can: each lane and each
        gateway call is done, stopped at its pause, waiting for the machine to answer its
        call, or waiting for a row lock another one holds."""
        async def blocked() -> bool:
            lock_waiters = int(await db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                f"AND query LIKE '%{SCHEMA}%'"))
            paused = {name for name, _ in self.paused if self.pauses.reached[name].is_set()}
            lanes = [t for t in self.lanes if not t.done() and t.get_name() not in paused]
            calls = [t for w in self.workers for t in w._running
                     if not t.done()]
            return len(lanes) + len(calls) - len(self.gateway.pending) <= lock_waiters

        async def settle() -> None:
            await wait_for(blocked, bool, timeout=20, what="the lanes ran as far as they can",
                           interval=0.01)
        self.loop.run(settle())

    # ---- the end

    def teardown(self) -> None:
        if not hasattr(self, "gateway"):
            return
        self.loop.run(self._quiesce(), timeout=60)
        row = self.loop.run(pay.payment(self.engine, SCHEMA, self.saga_id))
        key = f"charge-{self.saga_id}"
        charged = key in self.gateway.charges
        refunded = charged and self.gateway.charges[key] in self.gateway.refunds
        standing = charged and not refunded
        status = row.status if row else None
        assert len(self.gateway.refunds) <= len(self.gateway.charges)
        if self.compensated and not (row and row.manual_refund_required):
            assert not standing, f"a compensated payment left a charge standing: {row}"
        if standing:
            assert status == "CAPTURED" or (row and row.manual_refund_required), row
        if status == "CAPTURED":
            assert standing, f"CAPTURED without a charge at the gateway: {row}"

    async def _quiesce(self) -> None:
        for _, release in self.paused:
            release.set()
        self.paused.clear()
        self.gateway.answer_now = True
        for call in self.gateway.pending:
            if not call.answer.done():
                call.answer.set_result("approved")
        self.gateway.pending.clear()
        for lane in self.lanes:
            await self._finished(lane)
        for running in self.workers:
            if running._running:
                await asyncio.wait(set(running._running), timeout=20)
        worker = pay.worker(self.engine, self.tables, self.gateway, _SETTINGS)
        if await pay.payment(self.engine, SCHEMA, self.saga_id) is None:
            return
        await pay.expire_lease(self.engine, SCHEMA, self.saga_id)  # of any worker that died
        row = await pay.settle(worker, self.engine, SCHEMA, self.saga_id, timeout=30)
        if row.status == "CHARGE_FAILED" and not self.compensated:
            # The order's payment step times out in pedidos, which cancels the order.
            self.compensated = True
            await pay.deliver(self.engine, self.tables, worker,
                              ev.orden_cancelada(self.saga_id, self.order_id))
            await pay.settle(worker, self.engine, SCHEMA, self.saga_id, timeout=30)


async def _scratch(done: asyncio.Event, ready: asyncio.Future[Any]) -> None:
    async with db.scratch_copy(SCHEMA, "pagos", pay.SCRATCH_TABLES) as copy:
        ready.set_result(copy)
        await done.wait()


def test_every_interleaving_of_the_payment_lanes_leaves_the_money_right(
        running_stack: None, monkeypatch: pytest.MonkeyPatch) -> None:
    loop = _Loop()
    done = asyncio.Event()
    ready: asyncio.Future[Any] = loop.loop.create_future()

    async def open_scratch() -> tuple[asyncio.Task[None], Any]:
        holder = asyncio.create_task(_scratch(done, ready))
        return holder, await ready

    holder, (engine, tables) = loop.run(open_scratch())
    try:
        pauses = _Pauses()
        pauses.install(monkeypatch)
        PaymentLanes.env = (loop, engine, tables, pauses)
        run_state_machine_as_test(PaymentLanes, settings=settings(
            max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
            # The same examples on every run of the suite, unless asked to explore afresh.
            derandomize=not os.environ.get("PAYMENT_LANES_EXPLORE"),
            suppress_health_check=list(HealthCheck)))
    finally:
        async def close_scratch() -> None:
            done.set()
            await holder
        loop.run(close_scratch())
        loop.close()
