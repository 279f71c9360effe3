"""pedidos' orders and sagas on PostgreSQL: the ``OrderStore`` its use cases depend on
(pedidos.usecases.ports), on a unit of work. It reads on the unit of work's connection and
stages its writes on the unit of work's commit statement (ADR 0002), guarded by what the
decision was taken on; the statements are built here once per shape."""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Executable,
    Float,
    Integer,
    ScalarSelect,
    Uuid,
    bindparam,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from pedidos.adapters.tables import notifications, operator_actions, orders, saga_audit, sagas
from pedidos.config import ORDEN_SOLICITADA_VERSIONS
from pedidos.domain.order import ACTIVE, SAGA_TYPE, STEP_OF, OrderStatus, owner_of
from pedidos.usecases.ports import (
    AuditEntry,
    ExistingOrder,
    OperatorAction,
    SagaState,
    Standing,
)
from sagakit import jsonio
from sagakit.store import Part, StagedWrite, UnitOfWork, WriteShape, driver


def _seconds_from_now(param: str) -> str:
    """SQL for the instant ``:param`` seconds after the statement's clock."""
    return f"now() + make_interval(secs => CAST(:{param} AS double precision))"


# The one order in which pedidos locks a saga's rows, in every path (a message's transition, a
# cancellation, a deadline): the saga row, then its order row. Two paths that took them in
# opposite orders deadlocked (a cancellation answered 500 "deadlock detected").
LOCK_ORDER = ("sagas", "orders")

# A saga step's writes are staged on its unit of work and go to the database with its commit
# statement (sagakit.store.unit_of_work): one round trip for the business rows, the inbox row and the
# outbox rows. Their parts are built once per shape, every value a bind parameter.
# What a write hands back of the saga row it wrote: the state the next event of that saga is
# decided on (pedidos.adapters.known_sagas), and the clock its metrics are taken from.
_ROW_IMAGE = ("saga_id, status, started_at, step_started_at, step_deadline_at, expires_at, "
              "now() AS db_now, stock_allocated_at IS NOT NULL AS stock_allocated")

# The guard of every write decided on a saga (``:expected``, ``:expected_allocated``): the saga
# row still holds the two facts a decision depends on, its status and whether a StockAsignado
# that came before the payment was recorded. Both only move forward (a status is never
# re-entered, an allocation never unrecorded), so a row that still shows them is the row the
# decision read. PagoExitoso is decided on both: without the allocation in the guard, a payment
# decided before an early StockAsignado committed would still find PENDIENTE_PAGO and leave the
# saga PENDIENTE_ASIGNACION, waiting for an allocation already recorded.
_GUARD = ("saga_id = :key_saga_id AND status = :expected "
          "AND (stock_allocated_at IS NOT NULL) = CAST(:expected_allocated AS boolean)")


def _guard_params(saga: SagaState) -> dict[str, Any]:
    return {"key_saga_id": uuid.UUID(saga.saga_id), "expected": saga.status.value,
            "expected_allocated": saga.stock_allocated}


def _audit_part(source: Part, with_deadline: bool = False) -> Part:
    """The audit row of a write, for the saga id ``source`` returns (none when it wrote
    nothing); its values are the ``audit_*`` parameters. ``with_deadline``: its detail also
    says when the step it started falls due (``step_deadline_at``, UTC), as ``source``
    returned it."""
    detail = "CAST(:audit_detail AS jsonb)"
    if with_deadline:
        detail += (" || jsonb_build_object('step_deadline_at', to_char(step_deadline_at "
                   "AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))")
    return Part("audited", f"""INSERT INTO {{saga_audit}} (saga_id, event_type, actor, from_status, to_status,
                          message_id, detail)
SELECT saga_id, :audit_event_type, :audit_actor, :audit_from, :audit_to, :audit_message_id,
       {detail}
FROM {{source}}
RETURNING id""", saga_audit, source=source)


def _audit_params(audit: AuditEntry, from_status: str | None, to_status: str | None
                  ) -> dict[str, Any]:
    return {"audit_event_type": audit.event_type, "audit_actor": audit.actor,
            "audit_from": from_status, "audit_to": to_status,
            "audit_message_id": audit.message_id,
            "audit_detail": jsonio.dumps(audit.detail or {})}


def _operator_action_part(source: Part) -> Part:
    """The operator's action that made a write, for the saga id ``source`` returns (none when
    it wrote nothing); its values are the ``act_*`` parameters."""
    return Part("acted", """INSERT INTO {operator_actions} (operator, action, saga_id, target, reason,
                                  detail)
SELECT :act_operator, :act_action, saga_id::text, saga_id::text, :act_reason,
       CAST(:act_detail AS jsonb)
FROM {source}
RETURNING id""", operator_actions, source=source)


def _operator_action_params(action: OperatorAction) -> dict[str, Any]:
    return {"act_operator": action.operator, "act_action": action.action,
            "act_reason": action.reason, "act_detail": jsonio.dumps(action.detail or {})}


_ORDER_COLUMNS = ("order_id", "saga_id", "customer_id", "status", "items", "total_amount",
                  "currency", "shipping_address", "payment_type", "idempotency_key",
                  "request_hash", "card_fingerprint")
_JSON_COLUMNS = {"items", "shipping_address"}


@functools.cache
def _creation(with_idempotency_key: bool) -> WriteShape:
    """Order, saga row and first audit row; with an idempotency key used before, nothing (the
    guard is the saga row, which goes in only with the order)."""
    first = OrderStatus.PENDIENTE_VALIDACION
    values = ", ".join(f"CAST(:new_{c} AS jsonb)" if c in _JSON_COLUMNS else f":new_{c}"
                       for c in _ORDER_COLUMNS)
    conflict = (" ON CONFLICT (customer_id, idempotency_key) DO NOTHING" if with_idempotency_key
                else "")
    inserted_order = Part("inserted_order", f"""INSERT INTO {{orders}} ({", ".join(_ORDER_COLUMNS)})
VALUES ({values}){conflict}
RETURNING order_id""", orders)
    saga_row = f"""INSERT INTO {{sagas}} (saga_id, saga_type, status, current_step, order_id, owner,
                    context, step_deadline_at, expires_at)
SELECT :new_saga_id, '{SAGA_TYPE}', '{first.value}', '{STEP_OF[first]}', order_id, :owner,
       CAST(:context AS jsonb), {_seconds_from_now("step_timeout_s")},
       {_seconds_from_now("saga_timeout_s")}
FROM {{inserted_order}}
RETURNING {_ROW_IMAGE}"""
    inserted_saga = Part("inserted_saga", saga_row, sagas, inserted_order)
    return WriteShape(inserted_order, inserted_saga, _audit_part(inserted_saga),
                      guard=inserted_saga, returning=inserted_saga)


def _step_deadline(capped: bool) -> str:
    """SQL for a step's deadline: its timeout from the statement's clock, or, ``capped``, the
    earlier of that and ``:step_deadline_by``."""
    timeout = _seconds_from_now("step_timeout_s")
    return (f"LEAST({timeout}, CAST(:step_deadline_by AS timestamptz))" if capped
            else timeout)


@functools.cache
def _transition(to: OrderStatus, order_columns: tuple[str, ...], timed: bool,
                notified: bool, acted: bool = False, capped: bool = False) -> WriteShape:
    """Saga, order and audit row (and the customer's notification, if ``notified``, and the
    operator's action, if ``acted``); each part runs only if the one before it matched
    (``_GUARD``): the guard is the saga row. With ``capped``, the step's deadline is no later
    than ``:step_deadline_by``, and the audit row says when it falls due.

    The saga row is written first, the order row after it: every path that changes a saga
    takes the saga row's lock before the order row's (``LOCK_ORDER``)."""
    step = STEP_OF.get(to)
    current_step = f"'{step}'" if step else "NULL"
    saga_set = [f"status = '{to.value}'", "updated_at = now()",
                f"current_step = {current_step}", "step_started_at = now()",
                "step_deadline_at = " + (_step_deadline(capped) if timed else "NULL")]
    if to not in ACTIVE:
        saga_set.append("finished_at = now()")
    order_set = [f"status = '{to.value}'", "updated_at = now()",
                 *(f"{c} = :set_{c}" for c in order_columns)]
    moved_saga = Part("moved_saga", f"""UPDATE {{sagas}} SET {", ".join(saga_set)}
WHERE {_GUARD}
RETURNING {_ROW_IMAGE}""", sagas)
    moved_order = Part("moved_order", f"""UPDATE {{orders}} SET {", ".join(order_set)}
WHERE order_id = :key_order_id AND EXISTS (SELECT 1 FROM {{moved_saga}})
RETURNING order_id""", orders, moved_saga)
    parts = [moved_saga, moved_order, _audit_part(moved_saga, with_deadline=capped)]
    if notified:
        parts.append(Part("notified", f"""INSERT INTO {{notifications}} (order_id, customer_id, kind, message)
SELECT order_id, :notify_customer_id, '{to.value}', :notify_message
FROM {{moved_order}}
RETURNING id""", notifications, moved_order))
    if acted:
        parts.append(_operator_action_part(moved_saga))
    return WriteShape(*parts, guard=moved_saga, returning=moved_saga)


@functools.cache
def _unmoved(order_columns: tuple[str, ...], allocated: bool = False) -> WriteShape:
    """An event that does not move the saga, recorded in its history (and the order's columns
    ``order_columns`` set; with ``allocated``, the saga's stock recorded as allocated), if the
    saga is still as decided on (``_GUARD``): the guard is the saga row, touched (an UPDATE
    re-reads a row changed meanwhile, where a SELECT would not)."""
    saga_set = "updated_at = now()" + (", stock_allocated_at = now()" if allocated else "")
    kept_saga = Part("kept_saga", f"""UPDATE {{sagas}} SET {saga_set}
WHERE {_GUARD}
RETURNING saga_id""", sagas)
    parts = [kept_saga]
    if order_columns:
        order_set = ", ".join(f"{c} = :set_{c}" for c in order_columns)
        parts.append(Part("annotated", f"""UPDATE {{orders}} SET updated_at = now(), {order_set}
WHERE order_id = :key_order_id AND EXISTS (SELECT 1 FROM {{kept_saga}})
RETURNING order_id""", orders, kept_saga))
    parts.append(_audit_part(kept_saga))
    return WriteShape(*parts, guard=kept_saga)


@functools.cache
def _saga_statement(lock: bool, skip_locked: bool = False) -> Executable:
    statement = (select(sagas.c.saga_id, sagas.c.order_id, orders.c.customer_id, sagas.c.status,
                        orders.c.total_amount, orders.c.currency, sagas.c.started_at,
                        sagas.c.step_started_at, sagas.c.step_deadline_at, sagas.c.expires_at,
                        func.now().label("db_now"),
                        sagas.c.stock_allocated_at.is_not(None).label("stock_allocated"))
                 .join(orders, orders.c.order_id == sagas.c.order_id)
                 .where(sagas.c.saga_id == bindparam("saga_id", type_=Uuid)))
    return statement.with_for_update(of=sagas, skip_locked=skip_locked) if lock else statement


# ---- the staged writes (also run by themselves, with ``StagedWrite.run``, by tests)

def creation_write(*, order_id: uuid.UUID, saga_id: uuid.UUID, body: dict[str, Any],
                   total: Decimal, idempotency_key: str | None, request_hash: str,
                   context: dict[str, Any], step_timeout_s: float, saga_timeout_s: float,
                   audit: AuditEntry, card_fingerprint: str | None = None) -> StagedWrite:
    """The order, its saga row and the first audit entry. Its guard finds nothing if the
    idempotency key exists already: that request's order stands, and nothing is written."""
    values = {"order_id": order_id, "saga_id": saga_id, "customer_id": body["customer_id"],
              "status": OrderStatus.PENDIENTE_VALIDACION.value,
              "items": jsonio.dumps(body["items"]), "total_amount": total,
              "currency": body["currency"],
              "shipping_address": jsonio.dumps(body["shipping_address"]),
              "payment_type": body["payment_method"]["type"],
              "idempotency_key": idempotency_key, "request_hash": request_hash,
              "card_fingerprint": card_fingerprint}
    params = {**{f"new_{c}": v for c, v in values.items()}, "owner": owner_of(body),
              "context": jsonio.dumps(context), "step_timeout_s": step_timeout_s,
              "saga_timeout_s": saga_timeout_s,
              **_audit_params(audit, None, OrderStatus.PENDIENTE_VALIDACION.value)}
    return StagedWrite(_creation(idempotency_key is not None), params)


def transition_write(saga: SagaState, to: OrderStatus, *, step_timeout_s: float | None,
                     audit: AuditEntry, notification: str | None = None,
                     operator_action: OperatorAction | None = None,
                     step_deadline_by: datetime | None = None,
                     **order_values: Any) -> StagedWrite:
    """Order, saga and audit row, and the customer's ``notification`` and the
    ``operator_action`` if any, only if the status is still the one the decision was made on
    (the guard). ``step_deadline_by``: the latest the step it starts may fall due (its
    timeout's deadline if that is earlier)."""
    capped = step_timeout_s is not None and step_deadline_by is not None
    shape = _transition(to, tuple(sorted(order_values)), step_timeout_s is not None,
                        notification is not None, operator_action is not None, capped)
    params = {"key_order_id": uuid.UUID(saga.order_id), **_guard_params(saga),
              "step_timeout_s": step_timeout_s,
              **{f"set_{c}": v for c, v in order_values.items()},
              **_audit_params(audit, saga.status.value, to.value)}
    if step_timeout_s is None:
        del params["step_timeout_s"]
    if capped:
        params["step_deadline_by"] = step_deadline_by
    if notification is not None:
        params.update(notify_customer_id=saga.customer_id, notify_message=notification)
    if operator_action is not None:
        params.update(_operator_action_params(operator_action))
    return StagedWrite(shape, params)


def unmoved_write(saga: SagaState, audit: AuditEntry, **order_values: Any) -> StagedWrite:
    """An event recorded in the saga's history without moving it (the order's columns
    ``order_values`` set), only if the saga is still as it was judged on."""
    params = {**_guard_params(saga), **{f"set_{c}": v for c, v in order_values.items()},
              **_audit_params(audit, saga.status.value, saga.status.value)}
    if order_values:
        params["key_order_id"] = uuid.UUID(saga.order_id)
    return StagedWrite(_unmoved(tuple(sorted(order_values))), params)


def allocation_write(saga: SagaState, audit: AuditEntry) -> StagedWrite:
    """The saga's stock recorded as allocated (a StockAsignado that came before the payment),
    with its history entry, without moving it; only if the saga is still as it was judged on,
    its allocation not recorded yet."""
    if saga.stock_allocated:
        raise ValueError(f"saga {saga.saga_id}: its allocation is recorded already")
    params = {**_guard_params(saga), **_audit_params(audit, saga.status.value, saga.status.value)}
    return StagedWrite(_unmoved((), allocated=True), params)


# ---- the saga's state

def _state(row: driver.Row) -> SagaState:
    return SagaState(str(row["saga_id"]), str(row["order_id"]), row["customer_id"],
                     OrderStatus(row["status"]), row["total_amount"], row["currency"],
                     row["started_at"], row["step_started_at"], row["step_deadline_at"],
                     row["expires_at"], row["db_now"], row["stock_allocated"])


def _as_written(saga: SagaState, image: Mapping[str, Any]) -> SagaState:
    """``saga`` as the commit statement that moved it returned its row (``_ROW_IMAGE``)."""
    return dataclasses.replace(
        saga, status=OrderStatus(image["status"]), started_at=image["started_at"],
        step_started_at=image["step_started_at"], step_deadline_at=image["step_deadline_at"],
        expires_at=image["expires_at"], db_now=image["db_now"],
        stock_allocated=image["stock_allocated"])


async def read_saga(conn: AsyncConnection, saga_id: str) -> SagaState | None:
    """The saga as it is now, without a lock: a write decided on it says which status it was
    decided on, and writes nothing if that status is gone."""
    rows = await driver.fetch(conn, _saga_statement(lock=False), {"saga_id": uuid.UUID(saga_id)})
    return _state(rows[0]) if rows else None


async def lock_saga(conn: AsyncConnection, saga_id: str,
                    skip_locked: bool = False) -> SagaState | None:
    """Locks the saga row, for the rest of the transaction."""
    row = (await conn.execute(_saga_statement(lock=True, skip_locked=skip_locked),
                              {"saga_id": uuid.UUID(saga_id)})).mappings().first()
    return _state(row) if row else None


# ---- what the limits of POST /orders count (pedidos.usecases.decline_velocity)

# A transaction-scoped advisory lock per customer and per card: the unit of work that places an
# order holds its customer's and its card's until it commits, so the next order of either is
# counted once this one is in (READ COMMITTED: its count is a statement that starts after the
# locks were granted, and sees what their holder committed). Both are taken in one statement,
# in the order of their keys, so that two units of work never wait for each other in a cycle;
# keyed as the commit statement keys its per-saga locks (sagakit.store.commit_statement), under
# names no saga id takes.
_HOLD = text("SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) "
             "FROM unnest(CAST(:keys AS text[])) AS k")


def holding_keys(customer_id: str, card_fingerprint: str) -> list[str]:
    """The advisory locks' keys of a customer's and a card's orders, in the order taken."""
    return sorted((f"pedidos.orders.customer:{customer_id}",
                   f"pedidos.orders.card:{card_fingerprint}"))


# Written as literals, not bound: the partial indexes of migration 0011 hold these orders only,
# and the planner uses one only for a query whose condition implies its own.
_WAITING = orders.c.status.in_([literal_column(f"'{s.value}'") for s in (
    OrderStatus.PENDIENTE_VALIDACION, OrderStatus.PENDIENTE_PAGO)])


def _counted(*where: ColumnElement[bool], up_to: str) -> ScalarSelect[int]:
    """How many orders match ``where``, counting no further than ``:up_to``."""
    matching = (select(literal_column("1")).select_from(orders).where(*where)
                .limit(bindparam(up_to, type_=Integer)).subquery())
    return select(func.count()).select_from(matching).scalar_subquery()


def _standing_columns(whose: ColumnElement[bool], prefix: str) -> list[ColumnElement[Any]]:
    window: ColumnElement[Any] = (literal_column("interval '1 second'")
                                  * bindparam("window_s", type_=Float))
    declined_at = orders.c.payment_declined_at
    # Read from the partial indexes of migration 0010 (declined orders only), backwards.
    recent = (declined_at.is_not(None), whose, declined_at > func.now() - window)
    up_to = bindparam(f"{prefix}_declines", type_=Integer)
    full_for = (select(func.extract("epoch", declined_at + window - func.now()))
                .where(*recent).order_by(declined_at.desc()).offset(up_to - literal_column("1"))
                .limit(literal_column("1"))
                .scalar_subquery())
    return [_counted(whose, _WAITING, up_to=f"{prefix}_waiting").label(f"{prefix}_waiting"),
            _counted(*recent, up_to=f"{prefix}_declines").label(f"{prefix}_declines"),
            full_for.label(f"{prefix}_full_for_s")]


# By the database's clock, the one every instance shares; each count stops at what the limits
# ask, so a customer with a long history costs no more than one with none.
_STANDING = select(
    *_standing_columns(orders.c.customer_id == bindparam("customer_id"), "customer"),
    *_standing_columns(orders.c.card_fingerprint == bindparam("card_fingerprint"), "card"))


def _standing_of(row: Mapping[str, Any], prefix: str) -> Standing:
    full_for = row[f"{prefix}_full_for_s"]
    return Standing(int(row[f"{prefix}_waiting"]), int(row[f"{prefix}_declines"]),
                    None if full_for is None else max(0.0, float(full_for)))


class OrderRepository:
    """``OrderStore`` on a unit of work: reads on its connection, writes on its commit
    statement."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow
        self._written: Callable[[Mapping[str, Any]], SagaState] | None = None

    def add(self, *, order_id: uuid.UUID, saga_id: uuid.UUID, body: dict[str, Any],
            total: Decimal, idempotency_key: str | None, request_hash: str,
            card_fingerprint: str, context: dict[str, Any], step_timeout_s: float,
            saga_timeout_s: float, audit: AuditEntry) -> None:
        self.uow.stage(creation_write(
            order_id=order_id, saga_id=saga_id, body=body, total=total,
            idempotency_key=idempotency_key, request_hash=request_hash,
            card_fingerprint=card_fingerprint, context=context,
            step_timeout_s=step_timeout_s, saga_timeout_s=saga_timeout_s, audit=audit))

        def created(image: Mapping[str, Any]) -> SagaState:
            return SagaState(str(image["saga_id"]), str(order_id), body["customer_id"],
                             OrderStatus(image["status"]), total, body["currency"],
                             image["started_at"], image["step_started_at"],
                             image["step_deadline_at"], image["expires_at"], image["db_now"],
                             image["stock_allocated"])

        self._written = created

    def move(self, saga: SagaState, to: OrderStatus, *, step_timeout_s: float | None,
             audit: AuditEntry, notification: str | None = None,
             operator_action: OperatorAction | None = None,
             step_deadline_by: datetime | None = None, **order_values: Any) -> None:
        self.uow.stage(transition_write(saga, to, step_timeout_s=step_timeout_s, audit=audit,
                                        notification=notification,
                                        operator_action=operator_action,
                                        step_deadline_by=step_deadline_by, **order_values))
        self._written = functools.partial(_as_written, saga)

    def record_unmoved(self, saga: SagaState, audit: AuditEntry, **order_values: Any) -> None:
        self.uow.stage(unmoved_write(saga, audit, **order_values))

    def record_allocation(self, saga: SagaState, audit: AuditEntry) -> None:
        self.uow.stage(allocation_write(saga, audit))

    def written(self) -> SagaState:
        # The row image the commit statement returned: no read after the write.
        if self._written is None:
            raise RuntimeError("nothing that returns the saga was staged")
        return self._written(self.uow.returned[0])

    async def hold_orders_of(self, customer_id: str, card_fingerprint: str) -> None:
        conn = self.uow.connection
        level = (conn.sync_connection.get_execution_options().get("isolation_level")
                 if conn.sync_connection is not None else None)
        # In autocommit the locks would end with their statement; in a snapshot taken once per
        # transaction (REPEATABLE READ and above: by the lock's own statement, before it was
        # granted) the count would miss what the last holder committed.
        if level not in (None, "READ COMMITTED"):
            raise RuntimeError(f"the limits of POST /orders are counted under their locks in "
                               f"READ COMMITTED, not {level}")
        # Through SQLAlchemy: the statement that begins the transaction the locks last for.
        await conn.execute(_HOLD, {"keys": holding_keys(customer_id, card_fingerprint)})

    async def standing(self, *, customer_id: str, card_fingerprint: str, window_s: float,
                       customer_declines: int, card_declines: int, customer_waiting: int,
                       card_waiting: int) -> tuple[Standing, Standing]:
        [row] = await driver.fetch(self.uow.connection, _STANDING, {
            "customer_id": customer_id, "card_fingerprint": card_fingerprint,
            "window_s": window_s, "customer_declines": customer_declines,
            "card_declines": card_declines, "customer_waiting": customer_waiting,
            "card_waiting": card_waiting})
        return _standing_of(row, "customer"), _standing_of(row, "card")

    async def by_idempotency_key(self, customer_id: str, key: str) -> ExistingOrder | None:
        row = (await self.uow.connection.execute(
            select(orders).where(orders.c.customer_id == customer_id,
                                 orders.c.idempotency_key == key))).first()
        if row is None:
            return None
        return ExistingOrder(str(row.order_id), str(row.saga_id), row.status, row.request_hash)

    async def read(self, saga_id: str) -> SagaState | None:
        return await read_saga(self.uow.connection, saga_id)

    async def lock(self, saga_id: str, skip_locked: bool = False) -> SagaState | None:
        return await lock_saga(self.uow.connection, saga_id, skip_locked)

    async def order_request(self, saga_id: str) -> dict[str, Any] | None:
        outbox = self.uow.tables.outbox
        row = (await self.uow.connection.execute(
            select(outbox.c.payload)
            .where(outbox.c.saga_id == saga_id,
                   outbox.c.event_type.in_(ORDEN_SOLICITADA_VERSIONS))
            .order_by(outbox.c.id).limit(1))).first()
        if row is None:
            return None
        envelope = row.payload if isinstance(row.payload, dict) else jsonio.loads(row.payload)
        payload: dict[str, Any] = envelope["payload"]
        return payload
