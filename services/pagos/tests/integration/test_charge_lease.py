"""pagos' StockVerificado handler and gateway worker against real PostgreSQL, in a scratch
schema (a copy of pagos' tables, so nothing reaches the running stack): a charge is leased by
the transaction that creates it and its gateway call starts right after that commit, with no
claim transaction of the worker's; with every gateway slot taken the charge is left due and
unleased, and the worker claims it as soon as any slot frees (not at its next poll); a
transaction that does not commit gives its slot back; and a call's outcome, decided on the
payment as it was leased and written without a lock, is decided again when the payment moved
during the call."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos.adapters.payment_repository import PaymentRepository
from pagos.config import PagosSettings
from pagos.domain.payment import Outcome, Payment
from pagos.entrypoints.messages import make_on_stock_verificado
from pagos.usecases.gateway_worker import GatewayWorker
from pagos.usecases.ports import ChargeResult, RefundResult
from saga_contracts.events.inventory import StockVerificado
from saga_harness import db
from saga_harness import events as ev
from saga_harness import payments as pay
from saga_harness.waiting import current, wait_for
from sagakit.message import Message
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import AlreadyProcessed, UnitOfWork

SCHEMA = "chargetest"


class _Gateway:
    """Answers every charge with an approval once ``open`` is set (and the saga's own gate, if
    it has one); records who asked."""

    def __init__(self) -> None:
        self.charged: list[str] = []
        self.refunded: list[str] = []
        self.open = asyncio.Event()
        self.open.set()
        self.gates: dict[str, asyncio.Event] = {}

    def hold(self, saga_id: str) -> asyncio.Event:
        return self.gates.setdefault(saga_id, asyncio.Event())

    async def charge(self, *, saga_id: str, **_: Any) -> ChargeResult:
        self.charged.append(saga_id)
        await self.open.wait()
        if saga_id in self.gates:
            await self.gates[saga_id].wait()
        return ChargeResult(Outcome.APPROVED, charge_id=f"ch_{saga_id[:8]}")

    async def refund(self, *, charge_id: str, **_: Any) -> RefundResult:
        self.refunded.append(charge_id)
        return RefundResult(True, refund_id=f"re_{charge_id}")

    async def close(self) -> None:
        return None


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with db.scratch_copy(SCHEMA, "pagos", ("payments", "outbox", "processed_messages")) as copy:
        yield copy


class _Claims:
    """Counts the worker's claim transactions (``PaymentRepository.claim_due``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = PaymentRepository.claim_due

        async def counted(repo: PaymentRepository, limit: int, lease_s: float) -> Any:
            self.count += 1
            return await original(repo, limit, lease_s)

        monkeypatch.setattr(PaymentRepository, "claim_due", counted)


@contextlib.asynccontextmanager
async def _running(worker: GatewayWorker, claims: _Claims) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    # Its first look at the table finds nothing due; from then on it waits for a kick.
    await wait_for(lambda: current(claims.count), lambda n: n >= 1, timeout=10,
                   what="the worker's first look at the table")
    try:
        yield
    finally:
        stop.set()
        worker.kick()
        await asyncio.wait_for(task, 10)


async def _deliver(engine: AsyncEngine, tables: MessagingTables, worker: GatewayWorker,
                   event: Message[StockVerificado]) -> None:
    """What the consumer does with one record: claim it, run the handler, commit."""
    async with UnitOfWork(engine, tables, "pagos") as uow:
        uow.claim(event.message_id, event.event_type, event.saga_id)
        await make_on_stock_verificado(worker)(uow, event)


async def _payment(engine: AsyncEngine, saga_id: str) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(text(
            f"SELECT status, lease_until > now() AS leased, charge_id, "
            f"lease_until - created_at AS lease, attempt_log FROM {SCHEMA}.payments WHERE saga_id = :s"),
            {"s": saga_id})).first()


def _worker(engine: AsyncEngine, tables: MessagingTables, gateway: _Gateway,
            concurrency: int) -> GatewayWorker:
    return pay.worker(engine, tables, gateway,
                      PagosSettings(worker_concurrency=concurrency, gateway_timeout_s=5))


async def test_a_charge_is_leased_where_it_is_created_and_called_without_a_claim(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch) -> None:
    engine, tables = scratch
    gateway, claims = _Gateway(), _Claims(monkeypatch)
    gateway.open.clear()  # hold the call, to look at the row while it is in flight
    worker = _worker(engine, tables, gateway, concurrency=4)
    saga_id = str(uuid.uuid4())
    async with _running(worker, claims):
        claims_before = claims.count
        await _deliver(engine, tables, worker, ev.stock_verificado(saga_id))
        await wait_for(lambda: current(list(gateway.charged)), lambda c: c == [saga_id],
                       timeout=5, what="the gateway called for the new charge")
        row = await _payment(engine, saga_id)
        assert row.status == "CHARGING" and row.leased, row
        assert abs(row.lease.total_seconds() - worker.settings.lease_s) < 1, \
            "leased for a gateway call's lease by the transaction that created it"
        gateway.open.set()
        row = await wait_for(lambda: _payment(engine, saga_id),
                             lambda r: r.status == "CAPTURED", timeout=5,
                             what="the charge's outcome recorded")
        assert row.charge_id == f"ch_{saga_id[:8]}" and not row.leased
        assert claims.count == claims_before, "no claim transaction for a leased charge"
    async with engine.connect() as conn:
        emitted = (await conn.execute(text(
            f"SELECT event_type FROM {SCHEMA}.outbox WHERE saga_id = :s"),
            {"s": saga_id})).scalars().all()
    assert emitted == ["PagoExitoso"]


async def test_with_every_slot_taken_the_charge_waits_due_and_is_claimed_when_one_frees(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch) -> None:
    engine, tables = scratch
    gateway, claims = _Gateway(), _Claims(monkeypatch)
    gateway.open.clear()
    worker = _worker(engine, tables, gateway, concurrency=1)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    async with _running(worker, claims):
        await _deliver(engine, tables, worker, ev.stock_verificado(first))
        await wait_for(lambda: current(list(gateway.charged)), lambda c: c == [first],
                       timeout=5, what="the first charge in flight")
        await _deliver(engine, tables, worker, ev.stock_verificado(second))
        row = await _payment(engine, second)
        assert row.status == "CHARGING" and row.leased is None, \
            "no slot free: created due now and unleased, for whichever worker frees first"
        gateway.open.set()
        for saga_id in (first, second):
            await wait_for(lambda s=saga_id: _payment(engine, s),  # type: ignore[misc]
                           lambda r: r.status == "CAPTURED", timeout=10,
                           what=f"charge of {saga_id} recorded")
    assert gateway.charged == [first, second]


async def test_a_transaction_that_does_not_commit_gives_its_slot_back(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch) -> None:
    engine, tables = scratch
    gateway, claims = _Gateway(), _Claims(monkeypatch)
    worker = _worker(engine, tables, gateway, concurrency=1)
    saga_id = str(uuid.uuid4())
    async with _running(worker, claims):
        event = ev.stock_verificado(saga_id)
        await _deliver(engine, tables, worker, event)
        await wait_for(lambda: _payment(engine, saga_id), lambda r: r.status == "CAPTURED",
                       timeout=5, what="the charge recorded")
        for _ in range(3):  # the same message again: rolled back at its claim, each time
            with pytest.raises(AlreadyProcessed):
                await _deliver(engine, tables, worker, event)
        later = str(uuid.uuid4())
        gateway.open.clear()
        await _deliver(engine, tables, worker, ev.stock_verificado(later))
        row = await _payment(engine, later)
        assert row.leased, "the only slot was free again: the new charge was leased at once"
        gateway.open.set()
        await wait_for(lambda: _payment(engine, later), lambda r: r.status == "CAPTURED",
                       timeout=5, what="the later charge recorded")
    assert gateway.charged == [saga_id, later]


async def test_a_charge_waiting_for_a_slot_starts_when_any_slot_frees(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch) -> None:
    """The slot that frees first is not necessarily the one whose call filled the last slot;
    whichever it is, the waiting charge goes at once. (Found by the benchmark: charges created
    while the slots were full waited for the worker's poll, 5 s, and 50 orders/s sustained 18.)"""
    engine, tables = scratch
    gateway, claims = _Gateway(), _Claims(monkeypatch)
    worker = _worker(engine, tables, gateway, concurrency=2)
    first, second, waiting = (str(uuid.uuid4()) for _ in range(3))
    first_gate, second_gate = gateway.hold(first), gateway.hold(second)
    async with _running(worker, claims):
        for saga_id in (first, second):
            await _deliver(engine, tables, worker, ev.stock_verificado(saga_id))
        await wait_for(lambda: current(set(gateway.charged)), lambda c: c == {first, second},
                       timeout=5, what="both slots taken")
        await _deliver(engine, tables, worker, ev.stock_verificado(waiting))
        assert (await _payment(engine, waiting)).leased is None
        first_gate.set()  # the first call ends; the second keeps its slot
        await wait_for(lambda: _payment(engine, waiting), lambda r: r.status == "CAPTURED",
                       timeout=worker.settings.worker_poll_interval_s / 2,
                       what="the waiting charge made in the freed slot, before any poll")
        second_gate.set()
    assert set(gateway.charged[:2]) == {first, second} and gateway.charged[2:] == [waiting]


class _Reads:
    """Records the status of every payment the worker reads back (``PaymentRepository.read``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.statuses: list[str] = []
        original = PaymentRepository.read

        async def recorded(repo: PaymentRepository, saga_id: str) -> Payment | None:
            payment = await original(repo, saga_id)
            self.statuses.append(payment.status.value if payment else "none")
            return payment

        monkeypatch.setattr(PaymentRepository, "read", recorded)


async def _emitted(engine: AsyncEngine, saga_id: str) -> list[str]:
    async with engine.connect() as conn:
        return list((await conn.execute(text(
            f"SELECT event_type FROM {SCHEMA}.outbox WHERE saga_id = :s ORDER BY id"),
            {"s": saga_id})).scalars().all())


async def test_an_uncontested_outcome_is_written_without_reading_the_payment_back(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch) -> None:
    """The outcome is decided on the payment the worker leased for the call and written with
    one guarded statement: nothing read back on the saga's critical path."""
    engine, tables = scratch
    gateway, claims, reads = _Gateway(), _Claims(monkeypatch), _Reads(monkeypatch)
    worker = _worker(engine, tables, gateway, concurrency=2)
    saga_id = str(uuid.uuid4())
    async with _running(worker, claims):
        await _deliver(engine, tables, worker, ev.stock_verificado(saga_id))
        await wait_for(lambda: _payment(engine, saga_id), lambda r: r.status == "CAPTURED",
                       timeout=10, what="the charge's outcome recorded")
    assert reads.statuses == []
    assert await _emitted(engine, saga_id) == ["PagoExitoso"]


async def test_an_outcome_is_decided_again_when_the_payment_moved_during_the_call(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch) -> None:
    """The outcome is written guarded by the status it was decided on (the leased payment's).
    A cancellation that commits while the call is in flight must win: the approval's write
    finds CHARGING gone and writes nothing, and the approval is decided again on the payment
    read back, CANCEL_REQUESTED, which means a refund, not a PagoExitoso for an order being
    cancelled."""
    engine, tables = scratch
    gateway, claims, reads = _Gateway(), _Claims(monkeypatch), _Reads(monkeypatch)
    worker = _worker(engine, tables, gateway, concurrency=2)
    saga_id = str(uuid.uuid4())
    gate = gateway.hold(saga_id)
    async with _running(worker, claims):
        await _deliver(engine, tables, worker, ev.stock_verificado(saga_id))
        await wait_for(lambda: current(list(gateway.charged)), lambda c: c == [saga_id],
                       timeout=5, what="the charge in flight")
        # What OrdenCancelada's handler writes while a call is in flight.
        async with engine.begin() as conn:
            await conn.execute(text(f"UPDATE {SCHEMA}.payments SET status = "
                                    "'CANCEL_REQUESTED' WHERE saga_id = :s"), {"s": saga_id})
        gate.set()
        row = await wait_for(lambda: _payment(engine, saga_id),
                             lambda r: r.status == "REFUNDED", timeout=10,
                             what="the approved charge of a cancelled order refunded")
    assert reads.statuses == ["CANCEL_REQUESTED"], \
        "the outcome decided on CHARGING was not written; it was decided again on a read"
    assert gateway.refunded == [f"ch_{saga_id[:8]}"]
    assert [a["kind"] for a in row.attempt_log] == ["charge", "refund"], \
        "the charge's outcome recorded once"
    assert await _emitted(engine, saga_id) == ["ReembolsoEjecutado"], \
        "no PagoExitoso for a cancelled order"
