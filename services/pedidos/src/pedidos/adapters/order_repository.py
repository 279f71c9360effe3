"""Queries of pedidos' tables, on the unit of work's connection."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    CTE,
    Executable,
    Float,
    Text,
    Uuid,
    bindparam,
    exists,
    func,
    insert,
    literal,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from pedidos.adapters.tables import notifications, orders, saga_audit, sagas
from pedidos.domain.order import ACTIVE, STEP_OF, OrderStatus

SAGA_TYPE = "OrderCheckThenPay"


@dataclass(frozen=True)
class SagaRow:
    saga_id: str
    order_id: str
    customer_id: str
    status: OrderStatus
    total_amount: Decimal
    currency: str
    started_at: datetime
    step_started_at: datetime
    step_deadline_at: datetime | None
    expires_at: datetime
    db_now: datetime

    @property
    def elapsed_s(self) -> float:
        return (self.db_now - self.started_at).total_seconds()

    @property
    def step_elapsed_ms(self) -> int:
        return int((self.db_now - self.step_started_at).total_seconds() * 1000)


@dataclass(frozen=True)
class AuditEntry:
    """Why a transition happened, for the saga's history."""

    event_type: str
    actor: str
    message_id: str | None = None
    detail: dict[str, Any] | None = None


def _interval(seconds: Any) -> Any:
    return func.make_interval(0, 0, 0, 0, 0, 0, seconds)


# The active statuses written into the SQL rather than bound: the deadline indexes are partial
# ("WHERE status IN (...active...)"), and a generic plan with bound statuses cannot prove that
# it only needs those rows.
_ACTIVE = sagas.c.status.in_([literal_column(f"'{s.value}'") for s in sorted(ACTIVE)])

# The statements a saga step runs are built once per shape and cached, their values bound at
# execution: building one of these CTE statements and its cache key took ~0.5 ms of pedidos'
# CPU per call (profile, docs/benchmarks.md run 8), several times what sending it costs.


def _audit_cte(saga_id: Any) -> CTE:
    """The audit row of a transition, inserted for each saga id ``saga_id`` yields (none when
    the statement's saga part wrote nothing); its values are the ``audit_*`` parameters."""
    return (
        insert(saga_audit).from_select(
            ["saga_id", "event_type", "actor", "from_status", "to_status", "message_id",
             "detail"],
            select(saga_id, bindparam("audit_event_type", type_=Text),
                   bindparam("audit_actor", type_=Text), bindparam("audit_from", type_=Text),
                   bindparam("audit_to", type_=Text), bindparam("audit_message_id", type_=Text),
                   bindparam("audit_detail", type_=JSONB)))
        .returning(saga_audit.c.id).cte("audited"))


def _audit_params(audit: AuditEntry, from_status: str | None, to_status: str) -> dict[str, Any]:
    return {"audit_event_type": audit.event_type, "audit_actor": audit.actor,
            "audit_from": from_status, "audit_to": to_status,
            "audit_message_id": audit.message_id, "audit_detail": audit.detail or {}}


def _wrote_one(order_cte: CTE, *other_ctes: CTE) -> Executable:
    """A statement of data-modifying CTEs that returns how many order rows it wrote. The other
    CTEs (audit row, notification) are selected too so that the statement is built whole
    (PostgreSQL runs every data-modifying CTE, read or not)."""
    return select(*(select(func.count()).select_from(cte).scalar_subquery()
                    for cte in (order_cte, *other_ctes)))


_ORDER_COLUMNS = ("order_id", "saga_id", "customer_id", "status", "items", "total_amount",
                  "currency", "shipping_address", "payment_type", "idempotency_key",
                  "request_hash")


@functools.cache
def _create_statement(with_idempotency_key: bool) -> Executable:
    first = OrderStatus.PENDIENTE_VALIDACION
    order = pg_insert(orders).values({c: bindparam(f"new_{c}", type_=orders.c[c].type)
                                      for c in _ORDER_COLUMNS})
    if with_idempotency_key:
        order = order.on_conflict_do_nothing(index_elements=[orders.c.idempotency_key])
    inserted_order = order.returning(orders.c.order_id).cte("inserted_order")
    inserted_saga = (
        insert(sagas).from_select(
            ["saga_id", "saga_type", "status", "current_step", "order_id", "owner",
             "context", "step_deadline_at", "expires_at"],
            select(bindparam("new_saga_id", type_=Uuid), literal(SAGA_TYPE, Text),
                   literal(first.value, Text), literal(STEP_OF[first], Text),
                   inserted_order.c.order_id, bindparam("owner", type_=Text),
                   bindparam("context", type_=JSONB),
                   func.now() + _interval(bindparam("step_timeout_s", type_=Float)),
                   func.now() + _interval(bindparam("saga_timeout_s", type_=Float))))
        .returning(sagas.c.saga_id).cte("inserted_saga"))
    return _wrote_one(inserted_order, _audit_cte(inserted_saga.c.saga_id))


@functools.cache
def _transition_statement(to: OrderStatus, order_columns: tuple[str, ...], timed: bool,
                          notified: bool = False) -> Executable:
    """Order, saga and audit row (and the customer's notification, if ``notified``) in one
    statement; each part runs only if the one before it matched (the status is still
    ``expected``), so a stale decision writes nothing."""
    saga_values: dict[str, Any] = {
        "status": to.value, "updated_at": func.now(), "current_step": STEP_OF.get(to),
        "step_started_at": func.now(),
        "step_deadline_at": (func.now() + _interval(bindparam("step_timeout_s", type_=Float))
                             if timed else None),
    }
    if to not in ACTIVE:
        saga_values["finished_at"] = func.now()
    expected = bindparam("expected", type_=Text)
    moved_order = (
        update(orders).where(orders.c.order_id == bindparam("key_order_id", type_=Uuid),
                             orders.c.status == expected)
        .values(status=to.value, updated_at=func.now(),
                **{c: bindparam(f"set_{c}", type_=orders.c[c].type) for c in order_columns})
        .returning(orders.c.order_id).cte("moved_order"))
    moved_saga = (
        update(sagas).where(sagas.c.saga_id == bindparam("key_saga_id", type_=Uuid),
                            sagas.c.status == expected, exists(select(moved_order.c.order_id)))
        .values(**saga_values).returning(sagas.c.saga_id).cte("moved_saga"))
    audited = _audit_cte(moved_saga.c.saga_id)
    if not notified:
        return _wrote_one(moved_order, audited)
    notification = (
        insert(notifications).from_select(
            ["order_id", "customer_id", "kind", "message"],
            select(moved_order.c.order_id, bindparam("notify_customer_id", type_=Text),
                   literal(to.value, Text), bindparam("notify_message", type_=Text))
            .where(exists(select(moved_saga.c.saga_id))))
        .returning(notifications.c.id).cte("notified"))
    return _wrote_one(moved_order, audited, notification)


@functools.cache
def _lock_statement(skip_locked: bool) -> Executable:
    return (select(sagas.c.saga_id, sagas.c.order_id, orders.c.customer_id, sagas.c.status,
                   orders.c.total_amount, orders.c.currency, sagas.c.started_at,
                   sagas.c.step_started_at, sagas.c.step_deadline_at, sagas.c.expires_at,
                   func.now().label("db_now"))
            .join(orders, orders.c.order_id == sagas.c.order_id)
            .where(sagas.c.saga_id == bindparam("saga_id", type_=Uuid))
            .with_for_update(of=sagas, skip_locked=skip_locked))


def owner_of(body: dict[str, Any]) -> str:
    """Whose saga it is: the customer who placed the order."""
    return str(body["customer_id"])


class OrderRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    # ---- creation

    async def create(self, *, order_id: uuid.UUID, saga_id: uuid.UUID, body: dict[str, Any],
                     total: Decimal, idempotency_key: str | None, request_hash: str,
                     context: dict[str, Any], step_timeout_s: float, saga_timeout_s: float,
                     audit: AuditEntry) -> bool:
        """The order, its saga row and the first audit entry, in one statement (one round trip
        instead of three). False if the idempotency key exists already: that request's order
        stands, and nothing is written (saga and audit are inserted only with the order)."""
        values = {"order_id": order_id, "saga_id": saga_id, "customer_id": body["customer_id"],
                  "status": OrderStatus.PENDIENTE_VALIDACION.value, "items": body["items"],
                  "total_amount": total, "currency": body["currency"],
                  "shipping_address": body["shipping_address"],
                  "payment_type": body["payment_method"]["type"],
                  "idempotency_key": idempotency_key, "request_hash": request_hash}
        params = {**{f"new_{c}": v for c, v in values.items()}, "owner": owner_of(body),
                  "context": context, "step_timeout_s": step_timeout_s,
                  "saga_timeout_s": saga_timeout_s,
                  **_audit_params(audit, None, OrderStatus.PENDIENTE_VALIDACION.value)}
        return await self._wrote_the_order(_create_statement(idempotency_key is not None),
                                           params)

    async def by_idempotency_key(self, key: str) -> dict[str, Any] | None:
        row = (await self.conn.execute(select(orders).where(orders.c.idempotency_key == key))
               ).first()
        return dict(row._mapping) if row else None

    # ---- the saga's state

    @staticmethod
    def _row(row: Any) -> SagaRow:
        return SagaRow(str(row.saga_id), str(row.order_id), row.customer_id,
                       OrderStatus(row.status), row.total_amount, row.currency, row.started_at,
                       row.step_started_at, row.step_deadline_at, row.expires_at, row.db_now)

    async def lock_saga(self, saga_id: str, skip_locked: bool = False) -> SagaRow | None:
        """Locks the saga row: every decision about one saga is taken one at a time."""
        row = (await self.conn.execute(_lock_statement(skip_locked),
                                       {"saga_id": uuid.UUID(saga_id)})).first()
        return self._row(row) if row else None

    async def transition(self, saga: SagaRow, to: OrderStatus, *,
                         step_timeout_s: float | None, audit: AuditEntry,
                         notification: str | None = None, **order_values: Any) -> bool:
        """Conditional: applies only if the status is still the one the decision was made on.

        Order, saga and audit row, and the customer's ``notification`` if any, in one
        statement (one round trip instead of four); each part runs only if the one before it
        matched, so a stale decision writes nothing."""
        statement = _transition_statement(to, tuple(sorted(order_values)),
                                          step_timeout_s is not None, notification is not None)
        params = {"key_order_id": uuid.UUID(saga.order_id), "key_saga_id": uuid.UUID(saga.saga_id),
                  "expected": saga.status.value, "step_timeout_s": step_timeout_s,
                  **{f"set_{c}": v for c, v in order_values.items()},
                  **_audit_params(audit, saga.status.value, to.value)}
        if notification is not None:
            params.update(notify_customer_id=saga.customer_id, notify_message=notification)
        return await self._wrote_the_order(statement, params)

    async def _wrote_the_order(self, statement: Executable, params: dict[str, Any]) -> bool:
        """Runs a statement built by ``_wrote_one``; True if it wrote the order's row."""
        written = (await self.conn.execute(statement, params)).one()
        return bool(written[0] == 1)

    async def annotate(self, order_id: str, **values: Any) -> None:
        await self.conn.execute(update(orders).where(orders.c.order_id == uuid.UUID(order_id))
                                .values(updated_at=func.now(), **values))

    async def due_sagas(self, limit: int) -> list[str]:
        rows = await self.conn.execute(
            select(sagas.c.saga_id)
            .where(_ACTIVE,
                   (sagas.c.step_deadline_at <= func.now()) | (sagas.c.expires_at <= func.now()))
            .order_by(sagas.c.step_deadline_at).limit(limit))
        return [str(r.saga_id) for r in rows]

    async def seconds_to_next_deadline(self) -> float | None:
        """How long until the earliest deadline still to come falls due (None: there is none),
        by the database clock, which is the one the deadlines are judged by."""
        step = (select(func.min(sagas.c.step_deadline_at))
                .where(_ACTIVE, sagas.c.step_deadline_at > func.now()).scalar_subquery())
        saga = (select(func.min(sagas.c.expires_at))
                .where(_ACTIVE, sagas.c.expires_at > func.now()).scalar_subquery())
        seconds = (await self.conn.execute(
            select(func.extract("epoch", func.least(step, saga) - func.now())))).scalar_one()
        return None if seconds is None else float(seconds)

    async def active_stats(self) -> tuple[int, float]:
        """How many sagas are active and the largest fraction of its deadline one has used."""
        active = [s.value for s in ACTIVE]
        used = func.extract("epoch", func.now() - sagas.c.started_at) / func.nullif(
            func.extract("epoch", sagas.c.expires_at - sagas.c.started_at), 0)
        count, worst = (await self.conn.execute(
            select(func.count(), func.coalesce(func.max(used), 0))
            .where(sagas.c.status.in_(active)))).one()
        return int(count), float(worst)

    # ---- audit

    async def audit(self, saga_id: str, *, event_type: str, actor: str,
                    from_status: OrderStatus | None, to_status: OrderStatus | None,
                    message_id: str | None = None, detail: dict[str, Any] | None = None) -> None:
        await self.conn.execute(saga_audit.insert(), {
            "saga_id": uuid.UUID(saga_id), "event_type": event_type, "actor": actor,
            "from_status": from_status.value if from_status else None,
            "to_status": to_status.value if to_status else None, "message_id": message_id,
            "detail": detail or {}})

    # ---- queries

    async def order(self, order_id: uuid.UUID) -> dict[str, Any] | None:
        row = (await self.conn.execute(select(orders).where(orders.c.order_id == order_id))
               ).first()
        return dict(row._mapping) if row else None

    async def saga(self, saga_id: uuid.UUID) -> dict[str, Any] | None:
        row = (await self.conn.execute(select(sagas).where(sagas.c.saga_id == saga_id))).first()
        return dict(row._mapping) if row else None

    async def history(self, saga_id: uuid.UUID) -> list[dict[str, Any]]:
        rows = await self.conn.execute(select(saga_audit).where(saga_audit.c.saga_id == saga_id)
                                       .order_by(saga_audit.c.id))
        return [dict(r._mapping) for r in rows]
