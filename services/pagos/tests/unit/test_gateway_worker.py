"""The gateway worker: it leases due work up to its free slots and makes each call, knows when
the next work falls due, hands its free slots to the transactions that create charges, and
looks for waiting work as soon as a slot frees."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from pagos import metrics as pagos_metrics
from pagos.config import PagosSettings
from pagos.domain.payment import Outcome, PaymentStatus
from pagos.usecases.gateway_worker import GatewayWorker
from pagos.usecases.ports import ChargeResult
from saga_harness import sealing
from sagakit.observability import metrics

from .fakes import FakeGateway, FakePayments, FakeUnit, FakeUnits, PaymentTable, Row

S = PaymentStatus
ORDER_ID = Row("", S.CHARGING).order_id or ""  # the fake rows' order


def _worker(table: PaymentTable, gateway: FakeGateway | None = None, concurrency: int = 2,
            poll_s: float = 0.05) -> tuple[GatewayWorker, FakeUnits]:
    units = FakeUnits(table)
    settings = PagosSettings(worker_concurrency=concurrency, worker_poll_interval_s=poll_s,
                             gateway_timeout_s=5)
    return GatewayWorker(units, gateway or FakeGateway(), settings,
                         sealing.opening_keys()), units


async def _until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.01)


def _due(table: PaymentTable, status: PaymentStatus = S.CHARGING, in_s: float = -1,
         **columns: Any) -> Row:
    saga_id = str(uuid.uuid4())
    charge = sealing.charge(saga_id=saga_id, order_id=ORDER_ID, amount="19.98")
    values: dict[str, Any] = {"token": sealing.sealed("tok_visa", charge),
                              "customer_id": charge.customer_id,
                              "next_attempt_at": table.in_(in_s)}
    values.update(columns)
    return table.add(saga_id, status, **values)


async def _calls_done(worker: GatewayWorker) -> None:
    if worker._running:
        await asyncio.wait(set(worker._running), timeout=5)


async def test_due_work_is_leased_and_its_calls_made() -> None:
    table = PaymentTable()
    charge, refund = _due(table), _due(table, S.REFUNDING, charge_id="ch_1", in_s=-2)
    gateway = FakeGateway()
    worker, units = _worker(table, gateway)
    assert await worker.run_due() == (2, None)
    claim = units.opened[0]
    assert claim.committed and not claim.reads_outside_transaction, \
        "the lease is taken in a transaction of its own"
    assert charge.lease_until == refund.lease_until == table.in_(worker.lease_s)
    await _calls_done(worker)
    assert sorted(kind for kind, _ in gateway.calls) == ["charge", "refund"]
    assert charge.status is S.CAPTURED and refund.status is S.REFUNDED


async def test_work_leased_to_a_call_in_flight_waits_for_its_lease_to_run_out() -> None:
    table = PaymentTable()
    leased = _due(table, lease_until=table.in_(10))
    expired = _due(table, lease_until=table.in_(-1))
    _due(table, S.CAPTURED)  # no gateway work
    worker, _ = _worker(table)
    assert (await worker.run_due())[0] == 1
    assert expired.lease_until == table.in_(worker.lease_s)
    assert leased.lease_until == table.in_(10)
    await _calls_done(worker)


async def test_with_nothing_due_the_worker_knows_when_the_next_work_falls_due() -> None:
    table = PaymentTable()
    worker, units = _worker(table)
    assert await worker.run_due() == (0, None), "nothing scheduled"
    _due(table, in_s=3)
    assert await worker.run_due() == (0, 3.0)
    _due(table, in_s=-1, lease_until=table.in_(2))
    assert await worker.run_due() == (0, 2.0), "due when the lease runs out"
    assert all(u.committed for u in units.opened)


async def test_no_more_work_is_leased_than_there_are_free_slots() -> None:
    table = PaymentTable()
    rows = [_due(table, in_s=-3 + i) for i in range(3)]
    gateway = FakeGateway()
    worker, _ = _worker(table, gateway, concurrency=2)
    assert (await worker.run_due())[0] == 2
    assert [r.lease_until is not None for r in rows] == [True, True, False], \
        "the longest due first"
    await _calls_done(worker)


async def test_a_worker_that_does_not_run_hands_out_no_slot() -> None:
    worker, _ = _worker(PaymentTable())
    assert worker.reserve() is None


async def test_slots_are_reserved_used_and_given_back() -> None:
    table = PaymentTable()
    worker, _ = _worker(table, concurrency=2)
    stop = asyncio.Event()
    loop = asyncio.create_task(worker.run(stop))
    try:
        await asyncio.sleep(0)
        first, second = worker.reserve(), worker.reserve()
        assert first is not None and second is not None
        assert worker.reserve() is None, "every slot reserved"
        worker.release(first)
        worker.release(first)  # a slot given back once only
        third = worker.reserve()
        assert third is not None and worker.reserve() is None
        row = _due(table, lease_until=table.in_(worker.lease_s))
        worker.start(second, row.payment(table.now))
        worker.release(second)  # used: no-op
        assert worker.reserve() is None
        await _until(lambda: row.status is S.CAPTURED, 5, "the started call recorded")
        assert worker.reserve() is not None, "the call's slot freed with it"
    finally:
        stop.set()
        worker.kick()
        await asyncio.wait_for(loop, 5)


class _HeldGateway(FakeGateway):
    """Holds the charge calls of ``held`` sagas until ``release`` is set."""

    def __init__(self, *held: str) -> None:
        super().__init__()
        self.held = set(held)
        self.release = asyncio.Event()

    async def charge(self, **call: Any) -> Any:
        if call["saga_id"] in self.held:
            await self.release.wait()
        return await super().charge(**call)


async def test_work_found_due_with_every_slot_taken_is_claimed_when_one_frees() -> None:
    """The worker's one slot went to the work its last claim found due; other work falls due
    meanwhile (made due by another instance, say): it is claimed as soon as the call ends, not
    at the worker's next poll (5 s here)."""
    table = PaymentTable()
    first = _due(table, in_s=-2)
    gateway = _HeldGateway(first.saga_id)
    worker, _ = _worker(table, gateway, concurrency=1, poll_s=5)
    stop = asyncio.Event()
    loop = asyncio.create_task(worker.run(stop))
    try:
        await _until(lambda: first.charge_sent, 5, "the first call in flight")
        waiting = _due(table)
        gateway.release.set()
        await _until(lambda: waiting.status is S.CAPTURED, 2,
                     "the waiting charge made in the freed slot, before any poll")
    finally:
        stop.set()
        worker.kick()
        await asyncio.wait_for(loop, 10)


async def test_a_charge_created_with_every_slot_taken_is_claimed_when_one_frees() -> None:
    """The one slot went to a charge created leased (``reserve``, ``start``); the next charge,
    finding no slot, is created unleased and claimed as soon as the call ends."""
    table = PaymentTable()
    gateway = _HeldGateway()
    worker, units = _worker(table, gateway, concurrency=1, poll_s=5)
    stop = asyncio.Event()
    loop = asyncio.create_task(worker.run(stop))
    try:
        await _until(lambda: bool(units.committed), 5, "the worker's first look")
        slot = worker.reserve()
        assert slot is not None
        first = _due(table, lease_until=table.in_(worker.lease_s))
        gateway.held.add(first.saga_id)
        worker.start(slot, first.payment(table.now))
        await _until(lambda: first.charge_sent, 5, "the first call in flight")
        assert worker.reserve() is None, "its only slot is taken"
        waiting = _due(table)
        gateway.release.set()
        await _until(lambda: waiting.status is S.CAPTURED, 2,
                     "the waiting charge made in the freed slot, before any poll")
    finally:
        stop.set()
        worker.kick()
        await asyncio.wait_for(loop, 10)


class _BrokenGateway(FakeGateway):
    """Every call raises, as a client failing on every reply would (an HTML page from a
    proxy in the place of the API's JSON, say)."""

    async def charge(self, **call: Any) -> Any:
        await super().charge(**call)
        raise ValueError("Expecting value: line 1 column 1 (char 0)")

    async def refund(self, **call: Any) -> Any:
        await super().refund(**call)
        raise KeyError("id")


# Retries due at once (the fake table's clock stands still): the budget is spent in a blink.
QUICK = PagosSettings(worker_poll_interval_s=0.05, gateway_timeout_s=5,
                      charge_retry_schedule_s=(0.0, 0.0), refund_retry_schedule_s=(0.0, 0.0),
                      resolve_attempts=2)


@pytest.mark.parametrize(("status", "columns", "ends", "calls", "alert"), [
    (S.CHARGING, {}, S.CHARGE_FAILED, 3, "charge_failed"),
    (S.CANCEL_REQUESTED, {"charge_sent": True, "charge_attempts": 3}, S.REFUND_FAILED, 2,
     "cancelled_charge_unresolved"),
    (S.REFUNDING, {"charge_id": "ch_1", "charge_sent": True}, S.REFUND_FAILED, 3,
     "refund_failed"),
])
async def test_calls_that_keep_failing_in_pagos_end_where_an_unanswering_gateway_ends(
        status: PaymentStatus, columns: dict[str, Any], ends: PaymentStatus, calls: int,
        alert: str) -> None:
    """Each failed call is recorded and counted against its budget, so the worker stops
    calling: the payment ends failed, with its alert, after as many calls as a gateway that
    never answers gets. Never a lease run out and the call made again, for ever, with nothing
    recorded."""
    table = PaymentTable()
    row = _due(table, status, **columns)
    gateway = _BrokenGateway()
    worker = GatewayWorker(FakeUnits(table), gateway, QUICK, sealing.opening_keys())
    alerts = metrics.ALERTS.labels("pagos", alert, "critical")._value.get()
    stop = asyncio.Event()
    loop = asyncio.create_task(worker.run(stop))
    try:
        await _until(lambda: row.status is ends, 5, f"{status} given up on as {ends}")
    finally:
        stop.set()
        worker.kick()
        await asyncio.wait_for(loop, 10)
    assert len(gateway.calls) == calls
    assert row.manual_refund_required is (ends is S.REFUND_FAILED)
    assert metrics.ALERTS.labels("pagos", alert, "critical")._value.get() == alerts + 1


class _DatabaseGone(FakeUnits):
    """The database is out of reach once the call has left: nothing can be recorded."""

    @contextlib.asynccontextmanager
    async def __call__(self, *, reads_outside_transaction: bool = False
                       ) -> AsyncIterator[tuple[FakeUnit, FakePayments]]:
        if len(self.opened) >= 1:
            raise ConnectionRefusedError("connection refused")
        async with super().__call__(reads_outside_transaction=reads_outside_transaction) as (
                unit, payments):
            yield unit, payments


async def test_a_call_whose_outcome_cannot_be_recorded_at_all_is_logged_and_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    """Not even "unknown" could be written: the attempt ends (its slot freed), said in the log
    and counted; the lease runs out and the call is made again, under the same key."""
    table = PaymentTable()
    row = _due(table, lease_until=table.in_(45))
    gateway = FakeGateway([ChargeResult(Outcome.UNAVAILABLE, detail="gateway timeout")])
    worker = GatewayWorker(_DatabaseGone(table), gateway, QUICK, sealing.opening_keys())
    unrecorded = pagos_metrics.GATEWAY_WORKER_ERRORS.labels(
        "pagos", "charge", "unrecorded")._value.get()
    await worker.attempt(row.payment(table.now))
    assert [kind for kind, _ in gateway.calls] == ["charge"]
    assert row.status is S.CHARGING and row.attempt_log == []
    assert pagos_metrics.GATEWAY_WORKER_ERRORS.labels(
        "pagos", "charge", "unrecorded")._value.get() == unrecorded + 1
    assert any("ConnectionRefusedError" in r.getMessage() for r in caplog.records)
