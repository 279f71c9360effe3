"""pagos' gateway worker, with its real HTTP client, when the gateway's answers cannot be
understood and when pagos itself fails around a call, against real PostgreSQL (a scratch copy
of pagos' tables) and a gateway served in the test's process.

A 200 that is not the API's (a proxy's HTML page) says nothing of what was done: each such
answer is counted against the call's budget and the payment ends where a gateway that never
answers leaves it: the charge in CHARGE_FAILED with its dead letter, a cancelled charge or a
refund in REFUND_FAILED with FalloReembolso. Never a lease run out and the call made again,
for ever, with nothing recorded. An outcome whose recording failed is written again, only while
the call still holds its lease (a commit that went through ended it)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos import metrics as pagos_metrics
from pagos.adapters.gateway_client import GatewayClient
from pagos.config import PagosSettings
from pagos.usecases import payment_events
from pagos.usecases.gateway_worker import GatewayWorker
from saga_harness import db
from saga_harness import events as ev
from saga_harness import payments as pay
from saga_harness.waiting import wait_for
from sagakit.errors import CommitOutcomeUnknown
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "unintelligible"
SETTINGS = pay.settings(resolve_attempts=2)  # retries 50 ms apart
PROXY_PAGE = b"<html><body><h1>502 Bad Gateway</h1>nginx</body></html>"

Scratch = tuple[AsyncEngine, MessagingTables]


class _Gateway:
    """Answers charges approved (the API's JSON) until ``proxy`` names the call (``charges``,
    ``refunds``): then a proxy's page with status 200; counts the calls."""

    def __init__(self) -> None:
        self.proxy: set[str] = set()
        self.calls: dict[str, int] = {"charges": 0, "refunds": 0}

    async def handle(self, request: web.Request) -> web.Response:
        call = request.path.rsplit("/", 1)[-1]
        self.calls[call] += 1
        if call in self.proxy:
            return web.Response(body=PROXY_PAGE, status=200, content_type="text/html")
        prefix = "ch" if call == "charges" else "re"
        return web.json_response({"id": f"{prefix}_{uuid.uuid4().hex[:12]}"})


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[_Gateway, str]]:
    fake = _Gateway()
    app = web.Application()
    app.router.add_post("/v1/charges", fake.handle)
    app.router.add_post("/v1/refunds", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield fake, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[Scratch]:
    async with db.scratch_copy(SCHEMA, "pagos", pay.SCRATCH_TABLES) as copy:
        yield copy


@contextlib.asynccontextmanager
async def _running(engine: AsyncEngine, tables: MessagingTables, url: str,
                   settings: PagosSettings = SETTINGS) -> AsyncIterator[GatewayWorker]:
    client = GatewayClient(url, secret_key="sk_test_not-a-real-key", timeout_s=2)
    worker = pay.worker(engine, tables, client, settings)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield worker
    finally:
        stop.set()
        worker.kick()
        await asyncio.wait_for(task, 10)
        await client.close()


async def _settled(engine: AsyncEngine, saga_id: str, status: str) -> Any:
    # Well inside the call's lease (the gateway timeout, 5 s, + 15 s): a call left unrecorded
    # would not be made again before the deadline.
    return await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id),
                          lambda r: r.status == status, timeout=10, what=f"payment {status}")


def _unintelligible(call: str) -> float:
    return pagos_metrics.GATEWAY_UNINTELLIGIBLE_REPLIES.labels("pagos", call)._value.get()


async def _dead_letters(engine: AsyncEngine, saga_id: str) -> list[Any]:
    async with engine.connect() as conn:
        return list((await conn.execute(text(
            f"SELECT payload FROM {SCHEMA}.outbox WHERE saga_id = :s AND topic = 'pagos-dlq'"),
            {"s": saga_id})).scalars().all())


async def _events(engine: AsyncEngine, saga_id: str) -> list[str]:
    """The saga's events pagos emitted, its dead letters aside."""
    async with engine.connect() as conn:
        return list((await conn.execute(text(
            f"SELECT event_type FROM {SCHEMA}.outbox WHERE saga_id = :s "
            "AND topic <> 'pagos-dlq' ORDER BY id"), {"s": saga_id})).scalars().all())


async def _attempts(engine: AsyncEngine, saga_id: str) -> list[tuple[str, str]]:
    async with engine.connect() as conn:
        log = (await conn.execute(text(
            f"SELECT attempt_log FROM {SCHEMA}.payments WHERE saga_id = :s"),
            {"s": saga_id})).scalar_one()
    return [(a["kind"], a["outcome"]) for a in log]


async def test_a_charge_answered_by_a_proxys_page_fails_into_its_dead_letter(
        scratch: Scratch, gateway: tuple[_Gateway, str]) -> None:
    engine, tables = scratch
    fake, url = gateway
    fake.proxy.add("charges")
    saga_id = str(uuid.uuid4())
    seen = _unintelligible("charge")
    async with _running(engine, tables, url) as worker:
        await pay.deliver(engine, tables, worker, ev.stock_verificado(saga_id))
        row = await _settled(engine, saga_id, "CHARGE_FAILED")
    assert row.charge_attempts == 3 and fake.calls["charges"] == 3, \
        "the first call and its two retries, each recorded"
    assert await _attempts(engine, saga_id) == [("charge", "unavailable")] * 3
    [letter] = await _dead_letters(engine, saga_id)
    assert letter["reason"] == "gateway_retries_exhausted"
    assert _unintelligible("charge") == seen + 3
    assert await _events(engine, saga_id) == []


async def test_a_cancelled_charge_whose_replays_get_a_proxys_page_is_left_for_a_refund_by_hand(
        scratch: Scratch, gateway: tuple[_Gateway, str]) -> None:
    engine, tables = scratch
    fake, url = gateway
    fake.proxy.add("charges")
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    # A second apart: the cancellation lands before the charge's first retry.
    slower = pay.settings(resolve_attempts=2, charge_retry_schedule_s=(1.0, 1.0))
    async with _running(engine, tables, url, slower) as worker:
        await pay.deliver(engine, tables, worker, ev.stock_verificado(saga_id, order_id))
        await wait_for(lambda: pay.payment(engine, SCHEMA, saga_id),
                       lambda r: r.charge_attempts == 1, timeout=10, what="a charge call")
        await pay.deliver(engine, tables, worker, ev.orden_cancelada(saga_id, order_id))
        row = await _settled(engine, saga_id, "REFUND_FAILED")
    assert row.manual_refund_required and (row.charge_attempts, row.resolve_attempts) == (1, 2)
    assert await _events(engine, saga_id) == ["FalloReembolso"]


async def test_a_failed_charge_cancelled_then_replayed_into_a_proxys_page_logs_every_call(
        scratch: Scratch, gateway: tuple[_Gateway, str]) -> None:
    """The charge's every call gets a proxy's page (CHARGE_FAILED), then the order is
    cancelled: pagos replays the charge, under its key, to find out whether it was made, and
    each replay gets a page too. Each call the gateway was sent is in the attempt log as not
    understood, the replays as the resolution's: none made again unrecorded."""
    engine, tables = scratch
    fake, url = gateway
    fake.proxy.add("charges")
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with _running(engine, tables, url) as worker:
        await pay.deliver(engine, tables, worker, ev.stock_verificado(saga_id, order_id))
        await _settled(engine, saga_id, "CHARGE_FAILED")
        await pay.deliver(engine, tables, worker, ev.orden_cancelada(saga_id, order_id))
        row = await _settled(engine, saga_id, "REFUND_FAILED")
    assert (row.charge_attempts, row.resolve_attempts) == (3, 2), row
    assert await _attempts(engine, saga_id) == [
        *[("charge", "unavailable")] * 3, *[("resolve", "unavailable")] * 2]
    assert fake.calls["charges"] == 5, "every call the gateway was sent is in the log"
    assert await _events(engine, saga_id) == ["FalloReembolso"]


async def test_a_refund_answered_by_a_proxys_page_is_left_for_a_refund_by_hand(
        scratch: Scratch, gateway: tuple[_Gateway, str]) -> None:
    engine, tables = scratch
    fake, url = gateway
    fake.proxy.add("refunds")
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    seen = _unintelligible("refund")
    async with _running(engine, tables, url) as worker:
        await pay.deliver(engine, tables, worker, ev.stock_verificado(saga_id, order_id))
        await _settled(engine, saga_id, "CAPTURED")
        await pay.deliver(engine, tables, worker, ev.orden_cancelada(saga_id, order_id))
        row = await _settled(engine, saga_id, "REFUND_FAILED")
    assert row.manual_refund_required and fake.calls["refunds"] == 3, row
    assert _unintelligible("refund") == seen + 3
    assert await _events(engine, saga_id) == ["PagoExitoso", "FalloReembolso"]


async def test_an_approval_whose_recording_failed_once_is_recorded_on_the_second_try(
        scratch: Scratch, gateway: tuple[_Gateway, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording the approval failed in pagos (its event could not be built, once): it is
    written again at once, guarded by the status and counts it was decided on, and the charge
    is captured on its first call, its approval recorded once."""
    engine, tables = scratch
    _, url = gateway
    original, failures = payment_events.pago_exitoso, [RuntimeError("event not built")]

    def failing_once(*args: Any) -> Any:
        if failures:
            raise failures.pop()
        return original(*args)

    monkeypatch.setattr(payment_events, "pago_exitoso", failing_once)
    saga_id = str(uuid.uuid4())
    async with _running(engine, tables, url) as worker:
        await pay.deliver(engine, tables, worker, ev.stock_verificado(saga_id))
        row = await _settled(engine, saga_id, "CAPTURED")
    assert not failures, "the recording failed once"
    assert (row.charge_attempts, row.leased) == (1, None), row
    assert await _attempts(engine, saga_id) == [("charge", "approved")]
    assert await _events(engine, saga_id) == ["PagoExitoso"]


async def test_an_outcome_whose_commit_went_through_is_not_recorded_again(
        scratch: Scratch, gateway: tuple[_Gateway, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The approval's commit statement committed and then its connection was lost: the
    unknown outcome that stands in for it finds the lease ended and writes nothing."""
    engine, tables = scratch
    _, url = gateway
    original, lost = UnitOfWork.commit, [CommitOutcomeUnknown("connection lost during commit")]

    async def losing_once(uow: UnitOfWork) -> bool:
        committed = await original(uow)
        if committed and uow.emitted and lost:
            raise lost.pop()
        return committed

    monkeypatch.setattr(UnitOfWork, "commit", losing_once)
    saga_id = str(uuid.uuid4())
    async with _running(engine, tables, url) as worker:
        await pay.deliver(engine, tables, worker, ev.stock_verificado(saga_id))
        row = await _settled(engine, saga_id, "CAPTURED")
        assert not lost, "the commit was lost once"
    assert row.charge_attempts == 1, row
    assert await _attempts(engine, saga_id) == [("charge", "approved")]
    assert await _events(engine, saga_id) == ["PagoExitoso"]
