"""pagos under the interleavings that can lose a refund, each forced with explicit barriers on
the real PostgreSQL (a scratch copy of pagos' tables) and judged by a model gateway's ledger:
whatever the timing, a cancelled order ends with no charge standing at the gateway, or is
marked for a manual refund.

The lanes that can run at once for one saga in pagos: the StockVerificado handler (topic
inventory-events), the OrdenCancelada handler (order-events), the FalloAsignacion handler
(inventory-events, after the charge), and the gateway worker's calls (one per lease; a second
one only after the first's lease ran out).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos.adapters.payment_repository import PaymentRepository
from pagos.domain.payment import Payment
from pagos.usecases.gateway_worker import GatewayWorker
from saga_contracts.sealing import is_sealed
from saga_harness import db, sealing
from saga_harness import events as ev
from saga_harness import payments as pay
from saga_harness.waiting import current, wait_for
from sagakit.store.tables import MessagingTables

SCHEMA = "paymentrace"

Scratch = tuple[AsyncEngine, MessagingTables]


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[Scratch]:
    async with db.scratch_copy(SCHEMA, "pagos", pay.SCRATCH_TABLES) as copy:
        yield copy


def _ids() -> tuple[str, str]:
    return str(uuid.uuid4()), str(uuid.uuid4())


def _held_when_it_finds_no_payment(monkeypatch: pytest.MonkeyPatch
                                   ) -> tuple[asyncio.Event, asyncio.Event]:
    """Stops the first compensation whose row lock finds no payment, right after that lock:
    ``found_nothing`` says it is there, ``go_on`` lets it record its decision."""
    found_nothing, go_on = asyncio.Event(), asyncio.Event()
    original_lock = PaymentRepository.lock

    async def lock_then_wait(repo: PaymentRepository, saga: str) -> Payment | None:
        found = await original_lock(repo, saga)
        if found is None and not found_nothing.is_set():
            found_nothing.set()
            await go_on.wait()
        return found

    monkeypatch.setattr(PaymentRepository, "lock", lock_then_wait)
    return found_nothing, go_on


async def _running(gw: GatewayWorker) -> tuple[asyncio.Event, asyncio.Task[None]]:
    stop = asyncio.Event()
    return stop, asyncio.create_task(gw.run(stop))


async def _stop(stop: asyncio.Event, task: asyncio.Task[None], gw: GatewayWorker) -> None:
    stop.set()
    gw.kick()
    await asyncio.wait_for(task, 10)


async def test_a_cancel_that_found_no_payment_still_undoes_the_charge_created_meanwhile(
        scratch: Scratch, monkeypatch: pytest.MonkeyPatch) -> None:
    """OrdenCancelada locks the saga's payment and finds none; before it records the
    cancellation, StockVerificado (another topic, another lane) creates the charge and its
    call goes out. The cancellation must not be dropped: the charge is resolved and refunded."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    found_nothing, go_on = _held_when_it_finds_no_payment(monkeypatch)
    gateway = pay.LedgerGateway()
    reply = gateway.hold(saga_id)
    gw = pay.worker(engine, tables, gateway)
    stop, task = await _running(gw)
    try:
        cancel = asyncio.create_task(pay.deliver(engine, tables, gw,
                                                 ev.orden_cancelada(saga_id, order_id)))
        await asyncio.wait_for(found_nothing.wait(), 10)
        await pay.deliver(engine, tables, gw, ev.stock_verificado(saga_id, order_id))
        await wait_for(lambda: current(gateway.charge_calls(saga_id)), lambda n: n == 1,
                       timeout=10, what="the charge sent to the gateway")
        go_on.set()
        await asyncio.wait_for(cancel, 10)
        reply.set()
        row = await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id),
                             lambda r: r.status in ("REFUNDED", "CAPTURED", "CANCELLED"),
                             timeout=10, what="the payment settled")
    finally:
        await _stop(stop, task, gw)
    assert row.status == "REFUNDED", row
    assert gateway.net_charged(saga_id) == 0
    assert "PagoExitoso" not in await pay.emitted(engine, SCHEMA, saga_id)


async def test_a_cancel_that_found_no_payment_drops_a_charge_created_meanwhile_but_not_sent(
        scratch: Scratch, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same race with every gateway slot taken: the charge is created due but unleased, so
    no call was sent when the cancellation decides, and it is dropped without one."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    found_nothing, go_on = _held_when_it_finds_no_payment(monkeypatch)
    gateway = pay.LedgerGateway()
    gw = pay.worker(engine, tables, gateway)  # not running: the charge waits, unleased
    cancel = asyncio.create_task(pay.deliver(engine, tables, gw,
                                             ev.orden_cancelada(saga_id, order_id)))
    await asyncio.wait_for(found_nothing.wait(), 10)
    await pay.deliver(engine, tables, gw, ev.stock_verificado(saga_id, order_id))
    go_on.set()
    await asyncio.wait_for(cancel, 10)
    row = await pay.settle(gw, engine, SCHEMA, saga_id)
    assert row.status == "CANCELLED" and row.payment_token is None, row
    assert gateway.charge_calls(saga_id) == 0


async def test_a_charge_whose_reply_was_lost_then_cancelled_is_resolved_by_replaying_it(
        scratch: Scratch) -> None:
    """Every charge call's reply is lost (the gateway made the charge): the charge fails with
    its outcome unknown. The cancellation must find out by replaying the charge's idempotency
    key, not conclude it never happened: the replay answers the charge, which is refunded."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway(lose_replies={saga_id})
    gw = pay.worker(engine, tables, gateway)
    await pay.deliver(engine, tables, gw, ev.stock_verificado(saga_id, order_id))
    row = await pay.settle(gw, engine, SCHEMA, saga_id)
    assert row.status == "CHARGE_FAILED" and gateway.net_charged(saga_id) == 1
    assert row.payment_token is not None, "kept: the outcome may still have to be replayed"
    assert is_sealed(row.payment_token), "kept sealed, as pedidos sealed it"
    assert gateway.tokens[saga_id] == "tok_visa", "the gateway got it opened"
    gateway.lose_replies.clear()  # the network is back
    await pay.deliver(engine, tables, gw, ev.orden_cancelada(saga_id, order_id))
    row = await pay.settle(gw, engine, SCHEMA, saga_id)
    assert row.status == "REFUNDED", row
    assert gateway.net_charged(saga_id) == 0
    assert row.payment_token is None


async def _call_in_flight(engine: AsyncEngine, tables: MessagingTables, gw: GatewayWorker,
                          gateway: pay.LedgerGateway, saga_id: str, order_id: str) -> None:
    """The charge created with no worker running (due, unleased), then leased by ``gw`` and
    sent; its reply is held by the test."""
    gateway.hold(saga_id)
    await pay.deliver(engine, tables, gw, ev.stock_verificado(saga_id, order_id))
    await gw.run_due()
    await wait_for(lambda: current(gateway.charge_calls(saga_id)), lambda n: n == 1,
                   timeout=10, what="the charge sent")


async def test_a_charge_whose_worker_died_after_its_lease_ran_out_is_still_resolved(
        scratch: Scratch) -> None:
    """The worker leased the charge, sent the call (the gateway made the charge) and died
    before it heard back; its lease ran out. A cancellation then must still treat the charge
    as maybe made: a claimed charge stays "maybe attempted" for ever."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway()
    dying = pay.worker(engine, tables, gateway)
    await _call_in_flight(engine, tables, dying, gateway, saga_id, order_id)
    for call in list(dying._running):
        call.cancel()
    await pay.expire_lease(engine, SCHEMA, saga_id)
    del gateway.holds[saga_id]
    await pay.deliver(engine, tables, dying, ev.orden_cancelada(saga_id, order_id))
    row = await pay.settle(pay.worker(engine, tables, gateway), engine, SCHEMA, saga_id)
    assert row.status == "REFUNDED", row
    assert gateway.net_charged(saga_id) == 0


async def test_a_cancelled_charge_that_cannot_be_resolved_is_marked_for_manual_refund(
        scratch: Scratch) -> None:
    """The gateway cannot be reached while a cancelled charge is being resolved: after every
    attempt, the payment is marked for a manual refund (docs/standard.md#pagos-charge-and-refund),
    FalloReembolso goes out, and the token is not kept."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway(lose_replies={saga_id})
    gw = pay.worker(engine, tables, gateway)
    await pay.deliver(engine, tables, gw, ev.stock_verificado(saga_id, order_id))
    await gw.run_due()
    await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id),
                   lambda r: r.charge_attempts >= 1, timeout=10, what="one unknown outcome")
    gateway.unreachable.add(saga_id)
    await pay.deliver(engine, tables, gw, ev.orden_cancelada(saga_id, order_id))
    row = await pay.settle(gw, engine, SCHEMA, saga_id)
    assert row.status == "REFUND_FAILED", row
    assert row.manual_refund_required, "left for finance to refund by hand"
    assert row.payment_token is None
    assert "FalloReembolso" in await pay.emitted(engine, SCHEMA, saga_id)


async def _second_worker_resolves(engine: AsyncEngine, tables: MessagingTables,
                                  gateway: pay.LedgerGateway, saga_id: str, order_id: str
                                  ) -> tuple[GatewayWorker, pay.LedgerGateway]:
    """The first call's lease runs out while it hangs; the order is cancelled; a second worker
    resolves the charge by replaying it (the same gateway, reached by another connection)."""
    await pay.expire_lease(engine, SCHEMA, saga_id)
    second_gateway = pay.LedgerGateway(charges=gateway.charges, refunds=gateway.refunds)
    second = pay.worker(engine, tables, second_gateway)
    await pay.deliver(engine, tables, second, ev.orden_cancelada(saga_id, order_id))
    await second.run_due()
    await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id),
                   lambda r: r.status == "REFUNDING", timeout=10, what="refund scheduled")
    return second, second_gateway


async def test_a_late_outcome_that_changes_nothing_leaves_the_refund_due_and_its_lease(
        scratch: Scratch) -> None:
    """Two charge calls of one payment in flight: the first worker's lease ran out while its
    call hung, a second worker resolved the cancelled charge and holds the refund's lease. The
    first call's late approval changes nothing (the payment is REFUNDING): it must neither
    unschedule the refund nor end the lease another worker holds."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway()
    first = pay.worker(engine, tables, gateway)
    await _call_in_flight(engine, tables, first, gateway, saga_id, order_id)
    second, second_gateway = await _second_worker_resolves(engine, tables, gateway, saga_id,
                                                           order_id)
    refund_call = second_gateway.hold_refund(saga_id)
    await second.run_due()  # the refund's call, held
    await wait_for(lambda: current(second_gateway.calls.count(("refund", saga_id))),
                   lambda n: n == 1, timeout=10, what="the refund in flight")
    gateway.holds[saga_id].set()  # the first call's approval arrives late
    # The second worker's replay counted as the resolution's; the late call, as the charge's.
    await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id),
                   lambda r: (r.charge_attempts, r.resolve_attempts) == (1, 1), timeout=10,
                   what="the late approval recorded")
    row = await pay.payment(engine, SCHEMA, saga_id)
    assert row.leased, f"the refund's lease belongs to the second worker: {row}"
    assert row.next_attempt_at is not None, f"the refund is still scheduled: {row}"
    refund_call.set()
    row = await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id),
                         lambda r: r.status == "REFUNDED", timeout=10,
                         what="the refund recorded")
    assert gateway.net_charged(saga_id) == 0


async def test_a_late_outcome_that_changes_nothing_does_not_strand_a_due_refund(
        scratch: Scratch) -> None:
    """As above, but the late approval lands before any worker took the refund: the refund must
    stay due and be made."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway()
    first = pay.worker(engine, tables, gateway)
    await _call_in_flight(engine, tables, first, gateway, saga_id, order_id)
    second, _ = await _second_worker_resolves(engine, tables, gateway, saga_id, order_id)
    gateway.holds[saga_id].set()  # the first call's approval arrives late
    # The second worker's replay counted as the resolution's; the late call, as the charge's.
    await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id),
                   lambda r: (r.charge_attempts, r.resolve_attempts) == (1, 1), timeout=10,
                   what="the late approval recorded")
    row = await pay.settle(second, engine, SCHEMA, saga_id)
    assert row.status == "REFUNDED", row
    assert gateway.net_charged(saga_id) == 0


async def test_a_cancel_between_the_lease_and_the_call_drops_the_charge_without_a_call(
        scratch: Scratch, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker leased the charge; before its call leaves, the cancellation commits. The
    call re-checks the payment right before it is sent: nothing is charged (no charge then
    refund for an order cancelled before any call left pagos)."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway()
    gw = pay.worker(engine, tables, gateway)
    leased: list[Payment] = []
    monkeypatch.setattr(gw, "_spawn", leased.append)  # the call has not started yet
    await pay.deliver(engine, tables, gw, ev.stock_verificado(saga_id, order_id))
    await gw.run_due()
    assert [p.saga_id for p in leased] == [saga_id]
    await pay.deliver(engine, tables, gw, ev.orden_cancelada(saga_id, order_id))
    await gw.attempt(leased[0])
    row = await pay.payment(engine, SCHEMA, saga_id)
    assert row.status == "CANCELLED", row
    assert gateway.charge_calls(saga_id) == 0


async def test_a_replayed_charge_keeps_the_token_its_idempotency_key_was_first_used_with(
        scratch: Scratch) -> None:
    """An operator replays a given-up charge with another token (``sagactl replay
    --payload``): the gateway would refuse the key with other parameters, and that refusal
    would prove nothing about the first call. The payment keeps its first token."""
    engine, tables = scratch
    saga_id, order_id = _ids()
    gateway = pay.LedgerGateway(lose_replies={saga_id})
    gw = pay.worker(engine, tables, gateway)
    await pay.deliver(engine, tables, gw, ev.stock_verificado(saga_id, order_id))
    assert (await pay.settle(gw, engine, SCHEMA, saga_id)).status == "CHARGE_FAILED"
    replay = ev.stock_verificado(saga_id, order_id, token="tok_mastercard",
                                 replay_of="an-earlier-message-id")
    await pay.deliver(engine, tables, gw, replay)
    row = await pay.payment(engine, SCHEMA, saga_id)
    assert row.status == "CHARGING", row
    charge = sealing.charge(saga_id=saga_id, order_id=order_id, amount="19.98")
    assert sealing.opening_keys().open(row.payment_token, charge) == "tok_visa", \
        "the first token, sealed as it came"
