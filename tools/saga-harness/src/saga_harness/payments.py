"""pagos' handlers and gateway worker run in-process on a scratch copy of its tables, against a
model of the payment gateway whose ledger says what really happened to the money.

The model keeps the gateway's one promise that pagos relies on: a charge happens at most once
per idempotency key, and a replay of the key answers what the first call did. Around it, a test
decides what the network does to each saga's calls: a request that never arrives, a reply that
is lost after the charge was made, a reply held until the test lets it go, a decline.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos.adapters.payment_repository import payment_units
from pagos.app import subscriptions
from pagos.config import PagosSettings
from pagos.domain.payment import Outcome
from pagos.usecases.gateway_worker import GatewayWorker
from pagos.usecases.ports import ChargeResult, PaymentGateway, RefundResult
from saga_harness import sealing
from sagakit.errors import StaleRead
from sagakit.message import Message
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCRATCH_TABLES = ("payments", "outbox", "processed_messages")


@dataclass
class LedgerGateway:
    """The gateway as pagos sees it (``PaymentGateway``), with a ledger of what it did."""

    charges: dict[str, str] = field(default_factory=dict)
    """Idempotency key → id of the charge made under it (made once, replayed after)."""
    refunds: dict[str, str] = field(default_factory=dict)
    """Charge id → id of its refund."""
    calls: list[tuple[str, str]] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)
    """Saga id → the payment token its last charge call came with (pagos opens it first)."""
    unreachable: set[str] = field(default_factory=set)
    """Sagas whose requests never arrive: nothing is made, the caller times out."""
    lose_replies: set[str] = field(default_factory=set)
    """Sagas whose charges are made but whose replies are lost: the caller times out."""
    declined: set[str] = field(default_factory=set)
    refunds_fail: set[str] = field(default_factory=set)
    holds: dict[str, asyncio.Event] = field(default_factory=dict)
    """Sagas whose charge reply waits for the event (the charge is made on arrival)."""
    refund_holds: dict[str, asyncio.Event] = field(default_factory=dict)

    def hold(self, saga_id: str) -> asyncio.Event:
        return self.holds.setdefault(saga_id, asyncio.Event())

    def hold_refund(self, saga_id: str) -> asyncio.Event:
        return self.refund_holds.setdefault(saga_id, asyncio.Event())

    async def charge(self, *, amount_minor: int, currency: str, token: str,
                     idempotency_key: str, saga_id: str) -> ChargeResult:
        self.calls.append(("charge", saga_id))
        self.tokens[saga_id] = token
        if saga_id in self.unreachable:
            return ChargeResult(Outcome.UNAVAILABLE, detail="timed out (never arrived)")
        if saga_id in self.declined and idempotency_key not in self.charges:
            return ChargeResult(Outcome.DECLINED, decline_code="card_declined",
                                detail="declined")
        charge_id = self.charges.setdefault(idempotency_key, f"ch_{uuid.uuid4().hex[:12]}")
        if saga_id in self.holds:
            await self.holds[saga_id].wait()
        if saga_id in self.lose_replies:
            return ChargeResult(Outcome.UNAVAILABLE, detail="timed out (reply lost)")
        return ChargeResult(Outcome.APPROVED, charge_id=charge_id)

    async def refund(self, *, charge_id: str, amount_minor: int,
                     idempotency_key: str) -> RefundResult:
        saga_id = self.saga_of(charge_id)
        self.calls.append(("refund", saga_id or charge_id))
        if saga_id in self.refund_holds:
            await self.refund_holds[saga_id].wait()
        if saga_id is None or saga_id in self.refunds_fail:
            return RefundResult(False, detail="refund failed")
        refund_id = self.refunds.setdefault(charge_id, f"re_{uuid.uuid4().hex[:12]}")
        return RefundResult(True, refund_id=refund_id)

    def saga_of(self, charge_id: str) -> str | None:
        for key, made in self.charges.items():
            if made == charge_id:
                return key.removeprefix("charge-")
        return None

    def net_charged(self, saga_id: str) -> int:
        """How many charges of the saga stand at the gateway: made and not refunded."""
        charge_id = self.charges.get(f"charge-{saga_id}")
        return int(charge_id is not None and charge_id not in self.refunds)

    def charge_calls(self, saga_id: str) -> int:
        return self.calls.count(("charge", saga_id))

    async def close(self) -> None:
        return None


def settings(**overrides: Any) -> PagosSettings:
    """Short schedules: the retries of a test take milliseconds."""
    values: dict[str, Any] = {"worker_concurrency": 8, "gateway_timeout_s": 5,
                              "charge_retry_schedule_s": (0.05, 0.05),
                              "refund_retry_schedule_s": (0.05, 0.05), "resolve_attempts": 3}
    values.update(overrides)
    return PagosSettings(**values)


def worker(engine: AsyncEngine, tables: MessagingTables, gateway: PaymentGateway,
           pagos_settings: PagosSettings | None = None) -> GatewayWorker:
    return GatewayWorker(
        payment_units(lambda **options: UnitOfWork(engine, tables, "pagos", **options)),
        gateway, pagos_settings or settings(), sealing.opening_keys())


async def deliver(engine: AsyncEngine, tables: MessagingTables, gw: GatewayWorker,
                  event: Message[Any]) -> None:
    """What the consumer does with one record: claim it, run its handler in the unit of work
    its subscription asks for (pagos.app), commit. A guarded write that found what its handler
    read gone raises ``StaleRead``, on which the consumer handles the record again."""
    subscription = {s.event_type: s for s in subscriptions(gw)}[event.event_type]
    async with UnitOfWork(engine, tables, "pagos", **subscription.unit_of_work_options) as uow:
        uow.claim(event.message_id, event.event_type, event.saga_id)
        await subscription.handler(uow, event)
        if not uow.ended:
            await uow.commit()
        if not uow.committed:
            raise StaleRead(f"{event.event_type}: what the handler read changed before its "
                            "write; nothing was written")


async def payment(engine: AsyncEngine, schema: str, saga_id: str) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(text(
            "SELECT status, payment_token, charge_id, charge_attempts, resolve_attempts, "
            "manual_refund_required, "
            "lease_until, lease_until > now() AS leased, next_attempt_at, "
            "next_attempt_at <= now() AS due, stock_allocated_at, allocation_failed_at "
            f"FROM {schema}.payments WHERE saga_id = :s"),
            {"s": saga_id})).first()


async def emitted(engine: AsyncEngine, schema: str, saga_id: str) -> list[str]:
    async with engine.connect() as conn:
        return list((await conn.execute(text(
            f"SELECT event_type FROM {schema}.outbox WHERE saga_id = :s ORDER BY id"),
            {"s": saga_id})).scalars().all())


async def expire_lease(engine: AsyncEngine, schema: str, saga_id: str) -> None:
    """The lease of a call ran out (its worker is gone): as time would leave it."""
    async with engine.begin() as conn:
        await conn.execute(text(f"UPDATE {schema}.payments SET lease_until = now() - "
                                "interval '1 second' WHERE saga_id = :s"), {"s": saga_id})


async def settle(gw: GatewayWorker, engine: AsyncEngine, schema: str, saga_id: str,
                 timeout: float = 15) -> Any:
    """Runs the worker's due work, claim by claim, until the payment has none left."""
    from saga_harness.waiting import wait_for

    async def step() -> Any:
        await gw.run_due()
        if gw._running:
            await asyncio.wait(set(gw._running), timeout=timeout)
        return await payment(engine, schema, saga_id)

    return await wait_for(step, lambda row: row.status not in
                          ("CHARGING", "CANCEL_REQUESTED", "REFUNDING"),
                          timeout=timeout, what=f"payment of {saga_id} settled")
