"""``PaymentWork``'s contract (pagos.usecases.ports), as the gateway worker uses it, run on the
in-memory fake and on ``PaymentRepository`` over PostgreSQL: due work leased (earliest first,
never work another call holds), the charge marked sent only under its own lease, a call's
outcome written with the commit only if the payment is still as it was decided on (and its
lease still held, where the outcome says so), dead letters parked with the commit."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from pagos.domain.payment import Payment, PaymentStatus
from pagos.usecases.ports import CallOutcome
from sagakit.dead_letters import DeadLetter

from .backends import PaymentBackend

P = PaymentStatus


async def _charge(payments: PaymentBackend, *, lease_s: float | None = None) -> str:
    saga_id = str(uuid.uuid4())
    async with payments.unit() as (uow, store):
        store.new_charge(saga_id=saga_id, order_id=str(uuid.uuid4()), customer_id="cust-1",
                         amount=Decimal("19.98"), currency="USD", token="sealed-1",
                         lease_s=lease_s, trigger={})
        assert await uow.commit()
    return saga_id


async def _claim(payments: PaymentBackend, limit: int = 10, lease_s: float = 30
                 ) -> list[Payment]:
    async with payments.unit() as (uow, store):
        claimed = await store.claim_due(limit, lease_s)
        assert await uow.commit()
    return claimed


async def _read(payments: PaymentBackend, saga_id: str) -> Payment:
    async with payments.unit(reads_outside_transaction=True) as (_, store):
        read = await store.read(saga_id)
    assert read is not None
    return read


async def _record(payments: PaymentBackend, decided_on: Payment, outcome: CallOutcome) -> bool:
    async with payments.unit(reads_outside_transaction=True) as (uow, store):
        store.record_outcome(decided_on, outcome)
        return await uow.commit()


async def test_due_work_is_leased_earliest_first_and_once(payments: PaymentBackend) -> None:
    async with payments.unit() as (_, store):
        assert await store.seconds_to_next_due() is None
    first = await _charge(payments)
    second = await _charge(payments)
    leased = await _charge(payments, lease_s=60)
    async with payments.unit() as (_, store):
        assert await store.seconds_to_next_due() == pytest.approx(0, abs=1)
    claimed = await _claim(payments, limit=1)
    assert [p.saga_id for p in claimed] == [first]
    assert claimed[0].leased and claimed[0].lease_until is not None
    assert [p.saga_id for p in await _claim(payments)] == [second]
    assert await _claim(payments) == []
    assert (await _read(payments, leased)).leased
    async with payments.unit() as (_, store):  # when the first lease runs out
        assert await store.seconds_to_next_due() == pytest.approx(30, abs=3)


async def test_a_lease_run_out_is_claimed_again(payments: PaymentBackend) -> None:
    saga_id = await _charge(payments, lease_s=-1)  # a lease that ran out a second ago
    assert not (await _read(payments, saga_id)).leased
    assert [p.saga_id for p in await _claim(payments)] == [saga_id]


async def test_a_charge_is_marked_sent_only_under_its_own_lease(
        payments: PaymentBackend) -> None:
    saga_id = await _charge(payments)
    [claimed] = await _claim(payments)
    async with payments.unit() as (uow, store):
        assert await store.mark_charge_sent(await _read(payments, saga_id)) is not None
        assert await uow.commit()
    assert (await _read(payments, saga_id)).charge_sent
    async with payments.unit() as (uow, store):
        sent = await store.mark_charge_sent(claimed)
        assert sent is not None and sent.charge_sent and sent.saga_id == saga_id
        assert await uow.commit()

    other = await _charge(payments)
    unleased = await _read(payments, other)
    async with payments.unit() as (uow, store):
        assert await store.mark_charge_sent(unleased) is None, "no lease: no call"
        assert await uow.commit()
    assert not (await _read(payments, other)).charge_sent


async def test_an_outcome_is_written_with_the_commit_as_decided_on(
        payments: PaymentBackend) -> None:
    saga_id = await _charge(payments)
    [claimed] = await _claim(payments)
    outcome = CallOutcome(attempt={"n": 1}, lease_until=claimed.lease_until, schedules=True,
                          retry_in_s=None, status=P.CAPTURED, clear_token=True,
                          charge_attempts=1, charge_id="ch_1")
    async with payments.unit(reads_outside_transaction=True) as (uow, store):
        store.record_outcome(claimed, outcome)
        assert (await _read(payments, saga_id)).status is P.CHARGING
        assert await uow.commit()
    read = await _read(payments, saga_id)
    assert (read.status, read.token, read.charge_attempts, read.charge_id, read.attempt_log,
            read.leased, read.lease_until) == (P.CAPTURED, None, 1, "ch_1", ({"n": 1},),
                                               False, None)
    assert not await _record(payments, claimed, outcome), "decided on a payment gone"
    assert (await _read(payments, saga_id)).attempt_log == ({"n": 1},)
    async with payments.unit() as (_, store):
        assert await store.seconds_to_next_due() is None


async def test_an_outcome_that_schedules_makes_the_work_due_later(
        payments: PaymentBackend) -> None:
    saga_id = await _charge(payments)
    [claimed] = await _claim(payments)
    assert await _record(payments, claimed, CallOutcome(
        attempt={"n": 1}, lease_until=claimed.lease_until, schedules=True, retry_in_s=120,
        charge_attempts=1))
    read = await _read(payments, saga_id)
    assert (read.status, read.charge_attempts, read.leased) == (P.CHARGING, 1, False)
    assert await _claim(payments) == []
    async with payments.unit() as (_, store):
        assert await store.seconds_to_next_due() == pytest.approx(120, abs=5)


async def test_an_outcome_that_needs_its_lease_writes_nothing_once_it_is_gone(
        payments: PaymentBackend) -> None:
    saga_id = await _charge(payments)
    [first] = await _claim(payments, lease_s=-1)  # a lease that ran out at once
    expired = first.lease_until
    assert expired is not None
    async with payments.unit() as (uow, store):  # the worker that took it over
        assert await store.claim_due(10, 30) != [] and await uow.commit()
    outcome = CallOutcome(attempt={"n": 1}, lease_until=expired, schedules=False,
                          lease_held=True, status=P.CAPTURED, charge_attempts=1)
    async with payments.unit(reads_outside_transaction=True) as (uow, store):
        store.record_outcome(first, outcome)
        store.dead_letter(DeadLetter("pagos-dlq", saga_id, "StockVerificado", {"k": 1}))
        assert not await uow.commit()
    read = await _read(payments, saga_id)
    assert (read.status, read.attempt_log) == (P.CHARGING, ())
    assert await payments.outbox(saga_id) == [], "the dead letter is not parked either"


async def test_a_dead_letter_is_parked_with_the_commit(payments: PaymentBackend) -> None:
    saga_id = await _charge(payments)
    [claimed] = await _claim(payments)
    async with payments.unit(reads_outside_transaction=True) as (uow, store):
        store.record_outcome(claimed, CallOutcome(
            attempt={"n": 1}, lease_until=claimed.lease_until, schedules=True,
            status=P.CHARGE_FAILED, charge_attempts=1))
        store.dead_letter(DeadLetter("pagos-dlq", saga_id, "StockVerificado", {"k": 1}))
        assert await payments.outbox(saga_id) == []
        assert await uow.commit()
    assert await payments.outbox(saga_id) == ["StockVerificado"]
    assert (await _read(payments, saga_id)).status is P.CHARGE_FAILED


async def test_workers_share_due_work_and_skip_what_a_transaction_holds(
        payments: PaymentBackend) -> None:
    first, second, held = (await _charge(payments), await _charge(payments),
                           await _charge(payments))
    async with payments.unit() as (handler, store):
        assert await store.lock(held) is not None  # a handler holds it meanwhile
        async with payments.unit() as (one, worker):
            leased = await worker.claim_due(1, 30)
            async with payments.unit() as (other, another):
                also = await another.claim_due(10, 30)
                assert await other.commit()
            assert await one.commit()
        assert await handler.commit()
    assert [p.saga_id for p in leased] == [first]
    assert [p.saga_id for p in also] == [second], "neither waits for nor takes a held row"
    assert [p.saga_id for p in await _claim(payments)] == [held]
