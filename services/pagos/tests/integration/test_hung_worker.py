"""A gateway worker that hangs holds its payments no longer than its bounds, and what it does
when it wakes is harmless. On the real PostgreSQL (a scratch copy of pagos' tables), through an
engine built as pagos builds its own (``sagakit.store.database.build_engine``), against a model
gateway whose ledger says what happened to the money.

Two things a worker holds, two bounds:

- Inside its claim transaction it holds the claimed rows' locks, and the rows' leases are not
  committed yet: other workers skip them (SKIP LOCKED) and a cancellation waits for them.
  PostgreSQL ends a transaction whose client sends nothing for
  ``DB_IDLE_IN_TRANSACTION_TIMEOUT_S`` (5 s), so a worker hung there (SIGSTOP, a lost network)
  holds them that long at most.
- A committed lease holds a payment for its call: ``PAGOS_GATEWAY_TIMEOUT_S`` + 15 s, by the
  database's clock. A worker hung in its call holds it that long; another worker then makes the
  call again under the same idempotency key, and the hung worker's late outcome changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos.adapters.payment_repository import PaymentRepository
from pagos.domain.payment import Payment
from saga_harness import config, db
from saga_harness import events as ev
from saga_harness import payments as pay
from saga_harness.waiting import current, wait_for
from sagakit.store.database import build_engine
from sagakit.store.tables import MessagingTables

SCHEMA = "hungworker"
Scratch = tuple[AsyncEngine, MessagingTables]

# DB_IDLE_IN_TRANSACTION_TIMEOUT_S's default, and what the measurement adds to it: the other
# worker's next claim, processes sharing cores.
IDLE_IN_TRANSACTION_S = 5.0
SLACK_S = 2.0


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[Scratch]:
    async with db.scratch_copy(SCHEMA, "pagos", pay.SCRATCH_TABLES) as (_, tables):
        engine = build_engine(config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://"),
                              "pagos", 4)
        try:
            yield engine.execution_options(schema_translate_map={"pagos": SCHEMA}), tables
        finally:
            await engine.dispose()


def _hanging_after_its_claim(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """The first claim that leases something never returns (its transaction stays open, as in
    a worker stopped right there); ``hung`` says it is there."""
    hung = asyncio.Event()
    original = PaymentRepository.claim_due

    async def claim_then_hang(repo: PaymentRepository, limit: int, lease_s: float
                              ) -> list[Payment]:
        due = await original(repo, limit, lease_s)
        if due and not hung.is_set():
            hung.set()
            await asyncio.Event().wait()
        return due

    monkeypatch.setattr(PaymentRepository, "claim_due", claim_then_hang)
    return hung


async def test_a_worker_hung_in_its_claim_holds_the_payment_no_longer_than_the_bound(
        scratch: Scratch, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, tables = scratch
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    gateway = pay.LedgerGateway()
    # No worker runs: the charge is created due and unleased, for whichever claims it.
    await pay.deliver(engine, tables, pay.worker(engine, tables, gateway),
                      ev.stock_verificado(saga_id, order_id))
    hung = _hanging_after_its_claim(monkeypatch)
    first = pay.worker(engine, tables, gateway)
    hanging = asyncio.create_task(first.run_due())
    try:
        await asyncio.wait_for(hung.wait(), 10)
        hung_at = time.monotonic()
        second = pay.worker(engine, tables, gateway)
        row = await pay.settle(second, engine, SCHEMA, saga_id,
                               timeout=IDLE_IN_TRANSACTION_S + SLACK_S)
        print(f"a worker hung in its claim held the payment {time.monotonic() - hung_at:.2f}s "
              f"(bound {IDLE_IN_TRANSACTION_S}s + {SLACK_S}s)")
    finally:
        hanging.cancel()
        with contextlib.suppress(BaseException):
            await hanging
    assert row.status == "CAPTURED", row
    assert gateway.charge_calls(saga_id) == 1, "charged once, by the worker that took over"
    assert await pay.emitted(engine, SCHEMA, saga_id) == ["PagoExitoso"]


async def test_a_worker_hung_in_its_call_holds_the_payment_for_its_lease_and_no_longer(
        scratch: Scratch) -> None:
    """The call's lease (gateway timeout + 15 s, here 16 s) runs out by the database's clock,
    not by anything the hung worker does: another worker makes the call again, under the same
    key, and the charge is made once. When the hung call's reply finally comes, it changes
    nothing: no second PagoExitoso, the lease of nobody else ended."""
    engine, tables = scratch
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    settings = pay.settings(gateway_timeout_s=1)
    gateway = pay.LedgerGateway()
    reply = gateway.hold(saga_id)  # the charge is made on arrival, its reply held
    first = pay.worker(engine, tables, gateway, settings)
    await pay.deliver(engine, tables, pay.worker(engine, tables, gateway, settings),
                      ev.stock_verificado(saga_id, order_id))
    await first.run_due()
    await wait_for(lambda: current(gateway.charge_calls(saga_id)), lambda n: n == 1,
                   timeout=10, what="the first call at the gateway, its reply held")
    leased_at = time.monotonic()

    # The second worker's gateway is the same ledger, reached on another connection: its
    # replay is answered at once.
    second = pay.worker(engine, tables, pay.LedgerGateway(charges=gateway.charges), settings)
    row = await pay.settle(second, engine, SCHEMA, saga_id, timeout=settings.lease_s + SLACK_S)
    took_s = time.monotonic() - leased_at
    print(f"a worker hung in its call held the payment {took_s:.2f}s "
          f"(its lease {settings.lease_s}s)")
    assert row.status == "CAPTURED", row
    assert took_s >= settings.lease_s - 1, "the call was made again before the lease ran out"
    assert gateway.net_charged(saga_id) == 1

    reply.set()  # the hung worker wakes with its reply
    await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id),
                   lambda r: r.charge_attempts == 2, timeout=10,
                   what="the late reply recorded")
    assert await pay.emitted(engine, SCHEMA, saga_id) == ["PagoExitoso"]
    row = await pay.payment(engine, SCHEMA, saga_id)
    assert row.status == "CAPTURED" and not row.leased, row
