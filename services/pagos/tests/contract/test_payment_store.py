"""``PaymentStore``'s contract (pagos.usecases.ports), as the event handlers use it, run on the
in-memory fake and on ``PaymentRepository`` over PostgreSQL: a new charge written with the
commit unless the saga has a payment (its saga id arbitrates, first write wins), a payment
without a charge refused likewise; status moves only from the status they were decided on;
the allocation's outcomes recorded, the staged one only if the payment is still as it was
decided on (else nothing of the unit, events included, and the commit returns False)."""

from __future__ import annotations

import uuid
from decimal import Decimal

from pagos.domain.payment import Payment, PaymentStatus
from saga_harness.events import stock_asignado

from .backends import PaymentBackend

P = PaymentStatus


def _ids() -> tuple[str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4())


async def _charge(payments: PaymentBackend, saga_id: str, order_id: str, *,
                  token: str = "sealed-1", lease_s: float | None = None) -> Payment | None:
    async with payments.unit() as (uow, store):
        store.new_charge(saga_id=saga_id, order_id=order_id, customer_id="cust-1",
                         amount=Decimal("19.98"), currency="USD", token=token,
                         lease_s=lease_s, trigger={"span_id": "s-1", "event": {"k": 1}})
        assert await uow.commit()
        return store.created()


async def _locked_move(payments: PaymentBackend, saga_id: str, to: PaymentStatus, *,
                      commit: bool) -> bool:
    """The payment locked and moved to ``to`` (due now, its token kept), as a handler moves
    it; committed only if ``commit``."""
    async with payments.unit() as (uow, store):
        locked = await store.lock(saga_id)
        assert locked is not None
        moved = await store.move(locked, to, due_now=True, clear_token=False)
        return moved and (not commit or await uow.commit())


async def _read(payments: PaymentBackend, saga_id: str) -> Payment | None:
    async with payments.unit(reads_outside_transaction=True) as (_, store):
        return await store.read(saga_id)


async def test_a_new_charge_is_written_with_the_commit_and_read_back(
        payments: PaymentBackend) -> None:
    saga_id, order_id = _ids()
    async with payments.unit() as (uow, store):
        store.new_charge(saga_id=saga_id, order_id=order_id, customer_id="cust-1",
                         amount=Decimal("19.98"), currency="USD", token="sealed-1",
                         lease_s=None, trigger={"span_id": "s-1", "event": {"k": 1}})
        assert await _read(payments, saga_id) is None
        assert await uow.commit()
        created = store.created()
    assert created is not None
    read = await _read(payments, saga_id)
    assert read == created
    assert (read.saga_id, read.order_id, read.status, read.amount, read.currency, read.token,
            read.customer_id, read.charge_attempts, read.leased, read.charge_sent,
            read.trigger_span_id, read.trigger_event, read.stock_allocated,
            read.allocation_failed) == (
        saga_id, order_id, P.CHARGING, Decimal("19.98"), "USD", "sealed-1", "cust-1", 0,
        False, False, "s-1", {"k": 1}, False, False)
    async with payments.unit() as (_, store):
        assert await store.lock(saga_id) == read
        assert await store.read(str(uuid.uuid4())) is None


async def test_the_first_payment_of_a_saga_wins(payments: PaymentBackend) -> None:
    saga_id, order_id = _ids()
    first = await _charge(payments, saga_id, order_id, token="first")
    assert first is not None
    assert await _charge(payments, saga_id, order_id, token="second") is None
    read = await _read(payments, saga_id)
    assert read is not None and (read.payment_id, read.token) == (first.payment_id, "first")
    async with payments.unit() as (uow, store):
        assert not await store.record_without_charge(saga_id=saga_id, order_id=order_id,
                                                     customer_id=None, status=P.CANCELLED)
        assert await uow.commit()
    read = await _read(payments, saga_id)
    assert read is not None and read.status is P.CHARGING


async def test_a_payment_without_a_charge_is_recorded_once(payments: PaymentBackend) -> None:
    saga_id, order_id = _ids()
    async with payments.unit() as (uow, store):
        assert await store.record_without_charge(saga_id=saga_id, order_id=order_id,
                                                 customer_id="cust-2", status=P.CANCELLED)
        assert await uow.commit()
    read = await _read(payments, saga_id)
    assert read is not None
    assert (read.status, read.order_id, read.customer_id, read.amount, read.token) == (
        P.CANCELLED, order_id, "cust-2", None, None)
    async with payments.unit() as (uow, store):
        assert not await store.record_without_charge(saga_id=saga_id, order_id=order_id,
                                                     customer_id=None, status=P.CANCELLED)
        assert await _charge(payments, saga_id, order_id) is None
    async with payments.unit() as (uow, store):
        assert await store.claim_due(10, 30) == [], "no gateway work"


async def test_a_move_applies_only_from_the_status_it_was_decided_on(
        payments: PaymentBackend) -> None:
    saga_id, order_id = _ids()
    created = await _charge(payments, saga_id, order_id)
    assert created is not None
    assert await _locked_move(payments, saga_id, P.CANCEL_REQUESTED, commit=True)
    async with payments.unit() as (uow, store):
        assert not await store.move(created, P.CANCELLED, due_now=False, clear_token=True)
        assert await uow.commit()
    read = await _read(payments, saga_id)
    assert read is not None and (read.status, read.token) == (P.CANCEL_REQUESTED, "sealed-1")
    async with payments.unit() as (uow, store):
        assert await store.move(read, P.CANCELLED, due_now=False, clear_token=True)
        assert await uow.commit()
    read = await _read(payments, saga_id)
    assert read is not None and (read.status, read.token) == (P.CANCELLED, None)


async def test_a_move_in_a_unit_that_never_commits_is_not_written(
        payments: PaymentBackend) -> None:
    saga_id, order_id = _ids()
    await _charge(payments, saga_id, order_id)
    assert await _locked_move(payments, saga_id, P.CANCEL_REQUESTED, commit=False)
    read = await _read(payments, saga_id)
    assert read is not None and (read.status, read.token, read.leased) == (
        P.CHARGING, "sealed-1", False)


async def test_an_allocation_failure_is_recorded_and_kept(payments: PaymentBackend) -> None:
    saga_id, order_id = _ids()
    await _charge(payments, saga_id, order_id)
    for _ in range(2):
        async with payments.unit() as (uow, store):
            locked = await store.lock(saga_id)
            assert locked is not None
            await store.record_allocation_failed(locked)
            assert await uow.commit()
    read = await _read(payments, saga_id)
    assert read is not None and (read.allocation_failed, read.status) == (True, P.CHARGING)


async def test_a_stock_allocation_is_recorded_once_as_decided_on(
        payments: PaymentBackend) -> None:
    saga_id, order_id = _ids()
    decided_on = await _charge(payments, saga_id, order_id)
    assert decided_on is not None
    async with payments.unit(reads_outside_transaction=True) as (uow, store):
        store.record_stock_allocated(decided_on)
        assert await uow.commit()
    read = await _read(payments, saga_id)
    assert read is not None and (read.stock_allocated, read.status) == (True, P.CHARGING)

    # Again, decided on the payment as it was before: nothing, events included.
    async with payments.unit(reads_outside_transaction=True) as (uow, store):
        store.record_stock_allocated(decided_on)
        uow.emit(stock_asignado(saga_id, order_id).payload, saga_id=saga_id)
        assert not await uow.commit()
    assert await payments.outbox(saga_id) == []


async def test_a_stock_allocation_decided_before_a_change_writes_nothing(
        payments: PaymentBackend) -> None:
    saga_id, order_id = _ids()
    decided_on = await _charge(payments, saga_id, order_id)
    assert decided_on is not None
    async with payments.unit() as (uow, store):  # meanwhile, a FalloAsignacion
        await store.record_allocation_failed(decided_on)
        assert await uow.commit()
    async with payments.unit(reads_outside_transaction=True) as (uow, store):
        store.record_stock_allocated(decided_on)
        assert not await uow.commit()
    async with payments.unit(reads_outside_transaction=True) as (uow, store):
        now = await store.read(saga_id)
        assert now is not None
        async with payments.unit() as (other, elsewhere):  # meanwhile, a cancellation
            assert await elsewhere.move(now, P.CANCEL_REQUESTED, due_now=True,
                                        clear_token=False)
            assert await other.commit()
        store.record_stock_allocated(now)
        assert not await uow.commit()
    read = await _read(payments, saga_id)
    assert read is not None and not read.stock_allocated


async def test_a_failed_charge_is_charged_again_only_from_charge_failed(
        payments: PaymentBackend) -> None:
    saga_id, order_id = _ids()
    await _charge(payments, saga_id, order_id)
    async with payments.unit() as (uow, store):
        assert not await store.charge_again(saga_id, "sealed-2")
        assert await uow.commit()
    assert await _locked_move(payments, saga_id, P.CHARGE_FAILED, commit=True)
    async with payments.unit() as (uow, store):
        assert await store.charge_again(saga_id, "sealed-2")
        assert await uow.commit()
    read = await _read(payments, saga_id)
    assert read is not None
    assert (read.status, read.token, read.charge_attempts, read.leased) == (
        P.CHARGING, "sealed-2", 0, False)
    async with payments.unit() as (uow, store):
        assert [p.saga_id for p in await store.claim_due(10, 30)] == [saga_id], "due now"
