"""In-memory twins of pagos' ports (pagos.usecases.ports), for unit tests of its use cases.

``PaymentTable`` holds the payments as pagos.adapters.payment_repository keeps them in
PostgreSQL, on a clock of its own, and ``FakePayments`` reads and writes them as the adapter
does: the unique saga id refuses a second payment, a status transition applies only from the
status it was decided on, an outcome's guarded write finds the status and attempt counts it
was decided on or writes nothing (and the commit returns False), leases run out on the clock,
and a lease compared with none (SQL's NULL) matches nothing. ``FakeUnit`` is the unit of work:
in a transaction, writes show at its commit (never if it fails); reading outside one, a write
run at once is committed at once (autocommit), and only staged writes wait for the commit. A
unit in a transaction holds the rows it locked or leased until it ends, and a claim of due
work skips them (``FOR UPDATE SKIP LOCKED``): two workers never lease one payment.

Hooks play the other lanes of a saga: ``before_insert`` and ``before_commit`` run what another
handler or worker commits at that moment.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pagos.domain.payment import CHARGE_WORK, REFUND_WORK, Outcome, Payment, PaymentStatus
from pagos.usecases.ports import CallOutcome, ChargeResult, RefundResult, Slot
from sagakit.dead_letters import DeadLetter
from sagakit.fakes import FakeUnitOfWork

START = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Row:
    """A payment row: every column the use cases read or write."""

    saga_id: str
    status: PaymentStatus
    payment_id: str = "00000000-0000-0000-0000-0000000000aa"
    order_id: str | None = "00000000-0000-0000-0000-0000000000bb"
    customer_id: str | None = None
    amount: Decimal | None = Decimal("19.98")
    currency: str | None = "USD"
    token: str | None = None
    charge_id: str | None = None
    decline_code: str | None = None
    refund_id: str | None = None
    amount_refunded: Decimal = Decimal("0")
    charge_attempts: int = 0
    resolve_attempts: int = 0
    refund_attempts: int = 0
    next_attempt_at: datetime | None = None
    lease_until: datetime | None = None
    charge_sent: bool = False
    attempt_log: list[dict[str, Any]] = field(default_factory=list)
    manual_refund_required: bool = False
    trigger: dict[str, Any] | None = None
    stock_allocated: bool = False
    allocation_failed: bool = False
    visible: bool = True
    """False: committed by another transaction that a read here does not see yet (its saga id
    refuses an insert all the same)."""

    def payment(self, now: datetime) -> Payment:
        trigger = self.trigger or {}
        return Payment(self.payment_id, self.saga_id, self.order_id, self.status, self.amount,
                       self.currency, self.token, self.charge_id, self.charge_attempts,
                       self.refund_attempts, self.lease_until is not None and self.lease_until > now,
                       self.charge_sent, self.lease_until, trigger.get("span_id"),
                       trigger.get("traceparent"), trigger.get("event"),
                       tuple(self.attempt_log), self.customer_id,
                       stock_allocated=self.stock_allocated,
                       allocation_failed=self.allocation_failed,
                       resolve_attempts=self.resolve_attempts)


class PaymentTable:
    """pagos' payments table, and its outbox's dead letters, in memory."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}
        self.now = START
        self.dead_letters: list[DeadLetter] = []
        self.before_insert: Callable[[], None] | None = None
        """Runs once, right before the next insert (another lane commits its payment)."""
        self.before_commit: Callable[[], None] | None = None
        """Runs right before every commit (another lane commits a change of the payment)."""
        self.locked: dict[str, FakeUnit] = {}
        """Saga id → the unit of work whose transaction holds its row locked."""
        self._ids = 0

    def add(self, saga_id: str, status: PaymentStatus, **columns: Any) -> Row:
        row = Row(saga_id, status, **columns)
        self.rows[saga_id] = row
        return row

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def in_(self, seconds: float) -> datetime:
        return self.now + timedelta(seconds=seconds)

    def visible(self, saga_id: str) -> Row | None:
        row = self.rows.get(saga_id)
        return row if row is not None and row.visible else None

    def new_id(self) -> str:
        self._ids += 1
        return f"00000000-0000-0000-0000-{self._ids:012d}"


@dataclass
class _Staged:
    holds: Callable[[], bool]
    apply: Callable[[], None]


class FakeUnit(FakeUnitOfWork):
    """A unit of work on ``table``: its commit runs the staged write, if its guard holds, with
    the writes run before it (in a transaction) and the dead letters parked."""

    def __init__(self, table: PaymentTable, *, reads_outside_transaction: bool = False,
                 commit_raises: BaseException | None = None) -> None:
        super().__init__("pagos")
        self.table = table
        self.reads_outside_transaction = reads_outside_transaction
        self.commit_raises = commit_raises
        self.staged: _Staged | None = None
        self.parked: list[DeadLetter] = []
        self._writes: list[Callable[[], None]] = []
        self.ended = False

    async def __aenter__(self) -> FakeUnit:
        return self

    async def __aexit__(self, *_: object) -> None:
        self._writes.clear()  # what was not committed is rolled back
        self._unlock()

    def hold(self, saga_id: str) -> None:
        """The payment's row, locked until the transaction ends (none outside one)."""
        if not self.reads_outside_transaction:
            self.table.locked.setdefault(saga_id, self)

    def held_elsewhere(self, saga_id: str) -> bool:
        return self.table.locked.get(saga_id, self) is not self

    def _unlock(self) -> None:
        for saga_id in [k for k, unit in self.table.locked.items() if unit is self]:
            del self.table.locked[saga_id]

    def write(self, apply: Callable[[], None]) -> None:
        """A write run at once: committed now when reading outside a transaction, else with
        the transaction."""
        if self.reads_outside_transaction:
            apply()
        else:
            self._writes.append(apply)

    def stage(self, staged: _Staged) -> None:
        if self.staged is not None:
            raise RuntimeError("a unit of work stages one write; make it several CTEs")
        self.staged = staged

    async def commit(self) -> bool:
        if self.ended:
            raise RuntimeError("unit of work already ended")
        self.ended = True
        self.commits += 1
        self._unlock()
        if self.commit_raises is not None:
            self._writes.clear()
            raise self.commit_raises
        if self.table.before_commit is not None:
            self.table.before_commit()
        if not self.commit_result or (self.staged is not None and not self.staged.holds()):
            self.emitted.clear()
            self.parked.clear()
            self._writes.clear()
            return False
        for apply in self._writes:
            apply()
        if self.staged is not None:
            self.staged.apply()
        self.table.dead_letters.extend(self.parked)
        self.committed = True
        for callback in self._after_commit:
            callback()
        return True


class FakePayments:
    """``PaymentStore`` and ``PaymentWork`` on ``table``, in ``uow``."""

    def __init__(self, table: PaymentTable, uow: FakeUnit) -> None:
        self.table = table
        self.uow = uow
        self._created: Payment | None = None
        self._leased = False

    # ---- reads

    async def read(self, saga_id: str) -> Payment | None:
        row = self.table.visible(saga_id)
        return row.payment(self.table.now) if row else None

    async def lock(self, saga_id: str) -> Payment | None:
        self.uow.hold(saga_id)
        return await self.read(saga_id)

    # ---- writes run at once

    async def record_without_charge(self, *, saga_id: str, order_id: str | None,
                                    customer_id: str | None, status: PaymentStatus) -> bool:
        if self.table.before_insert is not None:
            hook, self.table.before_insert = self.table.before_insert, None
            hook()
        if saga_id in self.table.rows:
            return False
        self.uow.write(lambda: self.table.rows.setdefault(saga_id, Row(
            saga_id, status, payment_id=self.table.new_id(), order_id=order_id,
            customer_id=customer_id, amount=None, currency=None)))
        return True

    async def move(self, payment: Payment, to: PaymentStatus, *, due_now: bool,
                   clear_token: bool) -> bool:
        row = self.table.visible(payment.saga_id)
        if row is None or row.status is not payment.status:
            return False

        def apply() -> None:
            row.status = to
            if due_now:
                row.next_attempt_at = self.table.now
            if clear_token:
                row.token = None
        self.uow.write(apply)
        return True

    async def record_allocation_failed(self, payment: Payment) -> None:
        row = self.table.visible(payment.saga_id)
        assert row is not None, "recorded on a payment its handler holds locked"
        self.uow.write(lambda: setattr(row, "allocation_failed", True))

    def record_stock_allocated(self, decided_on: Payment) -> None:
        def holds() -> bool:
            r = self.table.visible(decided_on.saga_id)
            return (r is not None and r.status is decided_on.status and not r.stock_allocated
                    and r.allocation_failed == decided_on.allocation_failed)

        def apply() -> None:
            r = self.table.visible(decided_on.saga_id)
            assert r is not None
            r.stock_allocated = True

        self.uow.stage(_Staged(holds, apply))

    async def charge_again(self, saga_id: str, token: str) -> bool:
        row = self.table.visible(saga_id)
        if row is None or row.status is not PaymentStatus.CHARGE_FAILED:
            return False

        def apply() -> None:
            row.status, row.token, row.charge_attempts = PaymentStatus.CHARGING, token, 0
            row.lease_until, row.next_attempt_at = None, self.table.now
        self.uow.write(apply)
        return True

    async def mark_charge_sent(self, payment: Payment) -> Payment | None:
        row = self.table.visible(payment.saga_id)
        if (row is None or payment.lease_until is None or row.lease_until != payment.lease_until
                or row.status not in CHARGE_WORK):
            return None
        self.uow.write(lambda: setattr(row, "charge_sent", True))
        return replace(row.payment(self.table.now), charge_sent=True)

    async def claim_due(self, limit: int, lease_s: float) -> list[Payment]:
        now = self.table.now
        due = sorted((r for r in self.table.rows.values()
                      if r.visible and r.status in CHARGE_WORK + REFUND_WORK
                      and r.next_attempt_at is not None and r.next_attempt_at <= now
                      and (r.lease_until is None or r.lease_until < now)
                      and not self.uow.held_elsewhere(r.saga_id)),
                     key=lambda r: r.next_attempt_at or now)[:limit]
        lease_until = self.table.in_(lease_s)
        for r in due:
            self.uow.hold(r.saga_id)
            self.uow.write(lambda r=r: setattr(r, "lease_until", lease_until))  # type: ignore[misc]
        return [Row(**{**r.__dict__, "lease_until": lease_until}).payment(now) for r in due]

    async def seconds_to_next_due(self) -> float | None:
        due = [max(r.next_attempt_at, r.lease_until or r.next_attempt_at)
               for r in self.table.rows.values()
               if r.visible and r.status in CHARGE_WORK + REFUND_WORK
               and r.next_attempt_at is not None]
        if not due:
            return None
        return max(0.0, (min(due) - self.table.now).total_seconds())

    # ---- writes staged on the commit

    def new_charge(self, *, saga_id: str, order_id: str, customer_id: str | None,
                   amount: Decimal, currency: str, token: str, lease_s: float | None,
                   trigger: dict[str, Any]) -> None:
        def apply() -> None:
            if saga_id in self.table.rows:
                return  # ON CONFLICT (saga_id) DO NOTHING
            row = Row(saga_id, PaymentStatus.CHARGING, payment_id=self.table.new_id(),
                      order_id=order_id, customer_id=customer_id, amount=amount,
                      currency=currency, token=token,
                      next_attempt_at=self.table.now, trigger=trigger,
                      lease_until=None if lease_s is None else self.table.in_(lease_s))
            self.table.rows[saga_id] = row
            self._created = row.payment(self.table.now)

        self._leased = lease_s is not None
        self.uow.stage(_Staged(lambda: True, apply))

    def created(self) -> Payment | None:
        return self._created

    def record_outcome(self, decided_on: Payment, outcome: CallOutcome) -> None:
        def row() -> Row | None:
            return self.table.visible(decided_on.saga_id)

        def holds() -> bool:
            r = row()
            return (r is not None and r.status is decided_on.status
                    and r.charge_attempts == decided_on.charge_attempts
                    and r.resolve_attempts == decided_on.resolve_attempts
                    and r.refund_attempts == decided_on.refund_attempts
                    and (not outcome.lease_held or r.lease_until == outcome.lease_until))

        def apply() -> None:
            r = row()
            assert r is not None
            if outcome.charge_attempts is not None:
                r.charge_attempts = outcome.charge_attempts
            if outcome.resolve_attempts is not None:
                r.resolve_attempts = outcome.resolve_attempts
            if outcome.refund_attempts is not None:
                r.refund_attempts = outcome.refund_attempts
            if outcome.charge_id is not None:
                r.charge_id = outcome.charge_id
            if outcome.decline_code is not None:
                r.decline_code = outcome.decline_code
            if outcome.status is not None:
                r.status = outcome.status
            if outcome.clear_token:
                r.token = None
            if outcome.manual_refund_required:
                r.manual_refund_required = True
            if outcome.disowned:
                r.customer_id = None
            if outcome.refunded:
                r.refund_id = outcome.refund_id
                assert outcome.amount_refunded is not None
                r.amount_refunded = outcome.amount_refunded
            r.attempt_log.append(outcome.attempt)
            if outcome.lease_until is not None and r.lease_until == outcome.lease_until:
                r.lease_until = None
            if outcome.schedules:
                r.next_attempt_at = (None if outcome.retry_in_s is None
                                     else self.table.in_(outcome.retry_in_s))

        self.uow.stage(_Staged(holds, apply))

    def dead_letter(self, letter: DeadLetter) -> None:
        self.uow.parked.append(letter)


class FakeUnits:
    """``PaymentUnits`` on ``table``; keeps every unit it opened."""

    def __init__(self, table: PaymentTable) -> None:
        self.table = table
        self.opened: list[FakeUnit] = []

    @contextlib.asynccontextmanager
    async def __call__(self, *, reads_outside_transaction: bool = False
                       ) -> AsyncIterator[tuple[FakeUnit, FakePayments]]:
        unit = FakeUnit(self.table, reads_outside_transaction=reads_outside_transaction)
        self.opened.append(unit)
        async with unit:
            yield unit, FakePayments(self.table, unit)

    @property
    def committed(self) -> list[FakeUnit]:
        return [u for u in self.opened if u.committed]


class FakeGateway:
    """``PaymentGateway``: answers each call with the next scripted result (an approval, a
    refund, when none is left), or raises it if it is an exception (the client failing on a
    reply, say); ``during_call`` runs while a call is in flight."""

    def __init__(self, charges: list[ChargeResult | Exception] | None = None,
                 refunds: list[RefundResult | Exception] | None = None) -> None:
        self.charges = list(charges or [])
        self.refunds = list(refunds or [])
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.during_call: Callable[[], None] | None = None

    async def charge(self, *, amount_minor: int, currency: str, token: str,
                     idempotency_key: str, saga_id: str) -> ChargeResult:
        self.calls.append(("charge", {"amount_minor": amount_minor, "currency": currency,
                                      "token": token, "idempotency_key": idempotency_key,
                                      "saga_id": saga_id}))
        if self.during_call is not None:
            self.during_call()
        answer = self.charges.pop(0) if self.charges else ChargeResult(
            Outcome.APPROVED, charge_id=f"ch_{saga_id[:8]}")
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def refund(self, *, charge_id: str, amount_minor: int,
                     idempotency_key: str) -> RefundResult:
        self.calls.append(("refund", {"charge_id": charge_id, "amount_minor": amount_minor,
                                      "idempotency_key": idempotency_key}))
        if self.during_call is not None:
            self.during_call()
        answer = self.refunds.pop(0) if self.refunds else RefundResult(
            True, refund_id=f"re_{charge_id}")
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakeCalls:
    """``ChargeCalls``: ``free`` slots; records the calls started and the kicks."""

    lease_s = 45.0

    def __init__(self, free: int = 0) -> None:
        self.free = free
        self.started: list[Payment] = []
        self.released = 0
        self.kicks = 0

    def reserve(self) -> Slot | None:
        if self.free <= 0:
            return None
        self.free -= 1
        return Slot()

    def start(self, slot: Slot, payment: Payment) -> None:
        slot.held = False
        self.started.append(payment)

    def release(self, slot: Slot) -> None:
        if slot.held:
            slot.held = False
            self.free += 1
            self.released += 1

    def kick(self) -> None:
        self.kicks += 1


class FailingCommits(FakeUnits):
    """Units whose ``fail`` next commits that record an outcome raise ``error``, after
    writing if ``written``: a connection lost around the commit statement."""

    def __init__(self, table: PaymentTable, fail: int, error: Exception,
                 written: bool = False, spared: int = 1) -> None:
        super().__init__(table)
        self.fail, self.error, self.written, self.spared = fail, error, written, spared

    @contextlib.asynccontextmanager
    async def __call__(self, *, reads_outside_transaction: bool = False
                       ) -> AsyncIterator[tuple[FakeUnit, FakePayments]]:
        async with super().__call__(reads_outside_transaction=reads_outside_transaction) as (
                unit, payments):
            # ``spared``: the first units opened (a charge's re-check before its call) commit.
            if self.fail > 0 and len(self.opened) > self.spared:
                self.fail -= 1
                commit = unit.commit

                async def failing() -> bool:
                    if self.written:
                        await commit()
                    raise self.error
                unit.commit = failing
            yield unit, payments
