"""pagos' payments in PostgreSQL: the use cases' ``PaymentStore`` and ``PaymentWork``
(pagos.usecases.ports) on a unit of work, and the reads made outside one."""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    DateTime,
    Executable,
    Float,
    Integer,
    Text,
    bindparam,
    func,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.expression import ClauseElement

from pagos.adapters.tables import payments
from pagos.domain.payment import CHARGE_WORK, REFUND_WORK, Payment, PaymentStatus
from pagos.usecases.ports import CallOutcome, PaymentUnits
from sagakit import jsonio
from sagakit.dead_letters import DeadLetter
from sagakit.ids import time_ordered_id
from sagakit.store import Part, StagedWrite, UnitOfWork, WriteShape, driver

# The statements of a saga step are built once (per shape) and their values bound at
# execution: building a statement and its cache key costs more CPU than sending it.
_READ = (select(payments, (payments.c.lease_until > func.now()).label("leased"))
         .where(payments.c.saga_id == bindparam("k_saga_id", type_=Text)))
_LOCK = _READ.with_for_update()


# A gateway call's lease on its payment row, ``v_lease_s`` from now.
_LEASED_UNTIL = func.now() + func.make_interval(0, 0, 0, 0, 0, 0,
                                                bindparam("v_lease_s", type_=Float))


# A payment with no gateway work (a cancellation recorded before any charge), unless the saga
# has one.
_INSERT = (pg_insert(payments)
           .values({c: bindparam(f"v_{c}", type_=payments.c[c].type)
                    for c in ("payment_id", "saga_id", "order_id", "customer_id", "status")})
           .on_conflict_do_nothing(index_elements=[payments.c.saga_id])
           .returning(payments.c.payment_id))


@functools.cache
def _new_payment(leased: bool) -> WriteShape:
    """A payment due now (leased to the caller's gateway call if ``leased``), unless the saga
    has one: staged on the unit of work, sent with its commit statement."""
    lease = (", now() + make_interval(secs => CAST(:pay_lease_s AS double precision))"
             if leased else "")
    lease_column = ", lease_until" if leased else ""
    inserted = Part("inserted", f"""INSERT INTO {{payments}} (payment_id, saga_id, order_id,
    customer_id, status, amount, currency, payment_token, trigger, next_attempt_at{lease_column})
VALUES (:pay_payment_id, :pay_saga_id, :pay_order_id, :pay_customer_id, :pay_status, :pay_amount,
        :pay_currency, :pay_token, CAST(:pay_trigger AS jsonb), now(){lease})
ON CONFLICT (saga_id) DO NOTHING
RETURNING *""", payments)
    return WriteShape(inserted, returning=inserted)


@functools.cache
def _outcome(columns: tuple[str, ...], schedules: bool, lease_held: bool) -> WriteShape:
    """A gateway call's outcome, applied only if the payment's status and attempt counts are
    still those it was decided on (the guard), and with ``lease_held`` only while the call
    still holds its lease: the columns set, the call appended to the attempt log, the call's
    lease ended (only if it is still the caller's: a lease taken since by another worker is
    that worker's), and, if ``schedules``, the next attempt due ``:out_retry_in_s`` from now
    (NULL seconds: nothing due). An outcome that changes nothing does not schedule: the work
    due on the payment is whatever moved it meanwhile scheduled."""
    assigned = "".join(f"{c} = :out_{c}, " for c in columns)
    schedule = ("next_attempt_at = now() + make_interval(secs => CAST(:out_retry_in_s AS "
                "double precision)),\n    " if schedules else "")
    held = ("\n      AND lease_until = CAST(:out_lease AS timestamptz)" if lease_held else "")
    recorded = Part("recorded", f"""UPDATE {{payments}} SET {assigned}
    attempt_log = attempt_log || jsonb_build_array(CAST(:out_attempt AS jsonb)),
    lease_until = CASE WHEN lease_until = CAST(:out_lease AS timestamptz) THEN NULL
                       ELSE lease_until END,
    {schedule}updated_at = now()
WHERE saga_id = :out_saga_id AND status = :out_expected
      AND charge_attempts = :out_seen_charge_attempts
      AND resolve_attempts = :out_seen_resolve_attempts
      AND refund_attempts = :out_seen_refund_attempts{held}
RETURNING 1""", payments)
    return WriteShape(recorded, guard=recorded)


@functools.cache
def _update_statement(columns: tuple[str, ...]) -> Executable:
    values: dict[str, Any] = {c: bindparam(f"v_{c}", type_=payments.c[c].type) for c in columns}
    return (update(payments)
            .where(payments.c.saga_id == bindparam("k_saga_id", type_=Text),
                   payments.c.status == bindparam("k_expected", type_=Text))
            .values(updated_at=func.now(), **values))


_DUE = (select(payments.c.payment_id)
        .where(payments.c.status.in_([s.value for s in CHARGE_WORK + REFUND_WORK]),
               payments.c.next_attempt_at <= func.now(),
               (payments.c.lease_until.is_(None)) | (payments.c.lease_until < func.now()))
        .order_by(payments.c.next_attempt_at)
        .limit(bindparam("k_limit", type_=Integer))
        .with_for_update(skip_locked=True)
        .scalar_subquery())
_CLAIM_DUE = (update(payments).where(payments.c.payment_id.in_(_DUE))
              .values(lease_until=_LEASED_UNTIL)
              .returning(*payments.c))

# Right before a charge call: the payment still has charge work and the call's lease is still
# its worker's, and from now on the charge may have happened (``charge_sent_at``). Taken under
# the row's lock, so a cancellation decides either before it (no call will be sent: the
# charge is dropped) or after it (the call may have gone through: it is resolved).
_MARK_SENT = (update(payments)
              .where(payments.c.saga_id == bindparam("k_saga_id", type_=Text),
                     payments.c.lease_until == bindparam("k_lease", type_=DateTime(True)),
                     payments.c.status.in_([literal_column(f"'{s.value}'")
                                            for s in CHARGE_WORK]))
              .values(charge_sent_at=func.coalesce(payments.c.charge_sent_at, func.now()))
              .returning(*payments.c, (payments.c.lease_until > func.now()).label("leased")))


# inventario's answers are marks with a time of their own, like ``charge_sent_at``: they leave
# ``updated_at`` to the payment's changes of status and money.
# inventario's allocation failed: kept from the first FalloAsignacion on. Run under the row lock
# its handler holds.
_MARK_ALLOCATION_FAILED = (update(payments)
                           .where(payments.c.saga_id == bindparam("k_saga_id", type_=Text))
                           .values(allocation_failed_at=func.coalesce(
                                       payments.c.allocation_failed_at, func.now())))

# inventario allocated the stock: staged, guarded by what the decision was taken on (the
# status, and that no allocation was recorded and whether a failure was).
_ALLOCATED = Part("allocated", """UPDATE {payments}
SET stock_allocated_at = now()
WHERE saga_id = :alloc_saga_id AND status = :alloc_expected AND stock_allocated_at IS NULL
      AND (allocation_failed_at IS NOT NULL) = CAST(:alloc_failed AS boolean)
RETURNING 1""", payments)
_STOCK_ALLOCATED = WriteShape(_ALLOCATED, guard=_ALLOCATED)


def payment_of(row: driver.Row, leased: bool = False) -> Payment:
    """The payment a row of the table holds; ``leased``: a gateway call's lease on it has not
    run out (by the database clock, where the statement says)."""
    trigger = row["trigger"] or {}
    return Payment(str(row["payment_id"]), row["saga_id"],
                   str(row["order_id"]) if row["order_id"] else None,
                   PaymentStatus(row["status"]), row["amount"], row["currency"],
                   row["payment_token"], row["charge_id"], row["charge_attempts"],
                   row["refund_attempts"], leased, row["charge_sent_at"] is not None,
                   row["lease_until"], trigger.get("span_id"), trigger.get("traceparent"),
                   trigger.get("event"), tuple(row["attempt_log"] or ()), row["customer_id"],
                   stock_allocated=row["stock_allocated_at"] is not None,
                   allocation_failed=row["allocation_failed_at"] is not None,
                   resolve_attempts=row["resolve_attempts"],
                   trigger_record=_record_address(trigger.get("record")))


def _record_address(kept: Any) -> tuple[str, int, int] | None:
    if not isinstance(kept, list) or len(kept) != 3:
        return None
    return str(kept[0]), int(kept[1]), int(kept[2])


class PaymentRepository:
    """pagos' payments on one unit of work (``PaymentStore`` for the event handlers,
    ``PaymentWork`` for the gateway worker): reads on its connection; a write is either run
    at once, in the transaction its handler's row lock began, or staged on its commit
    statement (one staged write per unit of work)."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow
        self._leased = False  # whether the charge staged by ``new_charge`` is leased

    # ---------------------------------------------------------------- reads

    async def read(self, saga_id: str) -> Payment | None:
        """The payment as it is now, without a lock: a write decided on it says which status
        it was decided on (``record_outcome``), and writes nothing if that status is gone."""
        rows = await driver.fetch(self.uow.connection, _READ, {"k_saga_id": saga_id})
        return payment_of(rows[0], bool(rows[0]["leased"])) if rows else None

    async def lock(self, saga_id: str) -> Payment | None:
        row = (await self.uow.connection.execute(_LOCK, {"k_saga_id": saga_id})
               ).mappings().first()
        return payment_of(row, bool(row["leased"])) if row else None

    # ---------------------------------------------------------------- writes run at once

    async def record_without_charge(self, *, saga_id: str, order_id: str | None,
                                    customer_id: str | None, status: PaymentStatus) -> bool:
        row = (await self.uow.connection.execute(_INSERT, {
            "v_payment_id": time_ordered_id(), "v_saga_id": saga_id,
            "v_order_id": uuid.UUID(order_id) if order_id else None,
            "v_customer_id": customer_id, "v_status": status.value})).first()
        return row is not None

    async def move(self, payment: Payment, to: PaymentStatus, *, due_now: bool,
                   clear_token: bool) -> bool:
        values: dict[str, Any] = {"status": to.value}
        if due_now:
            values["next_attempt_at"] = func.now()
        if clear_token:
            values["payment_token"] = None
        return await self._update(payment.saga_id, payment.status, **values)

    async def charge_again(self, saga_id: str, token: str) -> bool:
        return await self._update(saga_id, PaymentStatus.CHARGE_FAILED,
                                  status=PaymentStatus.CHARGING.value, payment_token=token,
                                  charge_attempts=0, lease_until=None,
                                  next_attempt_at=func.now())

    async def _update(self, saga_id: str, expected: PaymentStatus, **values: Any) -> bool:
        """Conditional transition: applies only if the status is still ``expected``."""
        bound = {c: v for c, v in values.items() if not isinstance(v, ClauseElement)}
        params = {"k_saga_id": saga_id, "k_expected": expected.value,
                  **{f"v_{c}": v for c, v in bound.items()}}
        statement = _update_statement(tuple(sorted(bound)))
        if len(bound) < len(values):  # SQL expressions (a retry's due time): not cacheable
            statement = statement.values(  # type: ignore[attr-defined]
                {c: v for c, v in values.items() if c not in bound})
        res = await self.uow.connection.execute(statement, params)
        return res.rowcount == 1

    async def record_allocation_failed(self, payment: Payment) -> None:
        await self.uow.connection.execute(_MARK_ALLOCATION_FAILED,
                                          {"k_saga_id": payment.saga_id})

    async def mark_charge_sent(self, payment: Payment) -> Payment | None:
        rows = await driver.fetch(self.uow.connection, _MARK_SENT,
                                  {"k_saga_id": payment.saga_id, "k_lease": payment.lease_until})
        return payment_of(rows[0], bool(rows[0]["leased"])) if rows else None

    async def claim_due(self, limit: int, lease_s: float) -> list[Payment]:
        """Leases due work (charges, resolutions, refunds); SKIP LOCKED lets workers share."""
        rows = (await self.uow.connection.execute(_CLAIM_DUE,
                                                  {"k_limit": limit, "v_lease_s": lease_s})
                ).mappings().all()
        return [payment_of(r, True) for r in rows]

    async def seconds_to_next_due(self) -> float | None:
        return await seconds_to_next_due(self.uow.connection)

    # ---------------------------------------------------------------- writes staged on commit

    def new_charge(self, *, saga_id: str, order_id: str, customer_id: str | None,
                   amount: Decimal, currency: str, token: str, lease_s: float | None,
                   trigger: dict[str, Any]) -> None:
        """Staged: the unit of work returns the row (``returned``) unless the saga had one
        already. Leased, it is leased as ``claim_due`` would lease it: work handed straight to
        a gateway call."""
        params: dict[str, Any] = {
            "pay_payment_id": time_ordered_id(), "pay_saga_id": saga_id,
            "pay_order_id": uuid.UUID(order_id), "pay_customer_id": customer_id,
            "pay_status": PaymentStatus.CHARGING.value,
            "pay_amount": amount, "pay_currency": currency, "pay_token": token,
            "pay_trigger": jsonio.dumps(trigger)}
        if lease_s is not None:
            params["pay_lease_s"] = lease_s
        self.uow.stage(StagedWrite(_new_payment(lease_s is not None), params))
        self._leased = lease_s is not None

    def created(self) -> Payment | None:
        returned = self.uow.returned
        return payment_of(returned[0], leased=self._leased) if returned else None

    def record_outcome(self, decided_on: Payment, outcome: CallOutcome) -> None:
        """Staged, guarded by the status and attempt counts the outcome was decided on (and
        the call's lease, for an outcome that says so)."""
        values: dict[str, Any] = {}
        if outcome.charge_attempts is not None:
            values["charge_attempts"] = outcome.charge_attempts
        if outcome.resolve_attempts is not None:
            values["resolve_attempts"] = outcome.resolve_attempts
        if outcome.refund_attempts is not None:
            values["refund_attempts"] = outcome.refund_attempts
        if outcome.charge_id is not None:
            values["charge_id"] = outcome.charge_id
        if outcome.decline_code is not None:
            values["decline_code"] = outcome.decline_code
        if outcome.status is not None:
            values["status"] = outcome.status.value
        if outcome.clear_token:
            values["payment_token"] = None
        if outcome.manual_refund_required:
            values["manual_refund_required"] = True
        if outcome.disowned:
            values["customer_id"] = None
        if outcome.refunded:
            values.update(refund_id=outcome.refund_id, amount_refunded=outcome.amount_refunded)
        params = {"out_saga_id": decided_on.saga_id, "out_expected": decided_on.status.value,
                  "out_seen_charge_attempts": decided_on.charge_attempts,
                  "out_seen_resolve_attempts": decided_on.resolve_attempts,
                  "out_seen_refund_attempts": decided_on.refund_attempts,
                  "out_attempt": jsonio.dumps(outcome.attempt), "out_lease": outcome.lease_until,
                  **{f"out_{c}": v for c, v in values.items()}}
        if outcome.schedules:
            params["out_retry_in_s"] = outcome.retry_in_s
        self.uow.stage(StagedWrite(_outcome(tuple(sorted(values)), outcome.schedules,
                                            outcome.lease_held), params))

    def record_stock_allocated(self, decided_on: Payment) -> None:
        """Staged, guarded by the status and the allocation outcomes it was decided on."""
        self.uow.stage(StagedWrite(_STOCK_ALLOCATED, {
            "alloc_saga_id": decided_on.saga_id, "alloc_expected": decided_on.status.value,
            "alloc_failed": decided_on.allocation_failed}))

    def dead_letter(self, letter: DeadLetter) -> None:
        letter.emit(self.uow)


def payment_units(uow_factory: Callable[..., UnitOfWork]) -> PaymentUnits:
    """Units of work from ``uow_factory``, each with its ``PaymentRepository``."""

    @contextlib.asynccontextmanager
    async def unit(*, reads_outside_transaction: bool = False
                   ) -> AsyncIterator[tuple[UnitOfWork, PaymentRepository]]:
        async with uow_factory(reads_outside_transaction=reads_outside_transaction) as uow:
            yield uow, PaymentRepository(uow)

    return unit


async def seconds_to_next_due(conn: AsyncConnection) -> float | None:
    """How long until the earliest scheduled work falls due, or a lease on work runs out
    (None: nothing is scheduled), by the database clock."""
    due_at = func.greatest(payments.c.next_attempt_at,
                           func.coalesce(payments.c.lease_until, payments.c.next_attempt_at))
    seconds = (await conn.execute(
        select(func.extract("epoch", func.min(due_at) - func.now()))
        .where(payments.c.status.in_([s.value for s in CHARGE_WORK + REFUND_WORK]),
               payments.c.next_attempt_at.is_not(None)))).scalar_one()
    return None if seconds is None else max(0.0, float(seconds))


async def payment_records(conn: AsyncConnection, saga_id: str, customer_id: str | None = None
                          ) -> list[dict[str, Any]]:
    """Every payment row of the saga, by column, oldest first (for the HTTP API); with
    ``customer_id``, only that customer's."""
    query = select(payments).where(payments.c.saga_id == saga_id)
    if customer_id is not None:
        query = query.where(payments.c.customer_id == customer_id)
    rows = (await conn.execute(query.order_by(payments.c.created_at))).all()
    return [dict(r._mapping) for r in rows]
