"""In-memory twins of pedidos' storage (pedidos.usecases.ports), for the use cases' unit tests.

``OrderTables`` plays pedidos' tables and the database clock. ``FakeOrderStore`` does what
``pedidos.adapters.order_repository.OrderRepository`` does: it reads at once and stages one
write per unit of work, written when the unit of work commits and only if its guard holds (the
saga still in the status it was decided on, its allocation recorded or not as it was; for a new
order, its idempotency key unused by its customer); otherwise nothing of the unit of work is
written, its events included, and ``commit`` returns False. Tests move a saga "elsewhere"
(another instance, a deadline) by changing the tables directly, which is what makes a stale
decision's guard fail.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pedidos.domain.order import ACTIVE, OrderStatus
from pedidos.usecases.ports import (
    AuditEntry,
    DueSagas,
    ExistingOrder,
    OperatorAction,
    OrderStore,
    SagaState,
    Standing,
)
from saga_harness.events import message, payload_of
from sagakit import fakes
from sagakit.envelope import Envelope
from sagakit.message import Message
from sagakit.ports import UnitOfWorkPort

# What ``OrderStore.standing`` counts as an order waiting for its payment.
WAITING = {OrderStatus.PENDIENTE_VALIDACION.value, OrderStatus.PENDIENTE_PAGO.value}

ORDER_BODY: dict[str, Any] = {
    "customer_id": "c-1",
    "items": [{"sku": "SKU-1", "quantity": 2, "price": "5.00"}],
    "currency": "USD",
    "shipping_address": {"street": "s", "city": "c", "country": "PE", "postal_code": "1"},
    "payment_method": {"type": "credit_card", "token": "tok_visa"},
}


@dataclass
class OrderRecord:
    """The columns of an order row that pedidos writes."""

    order_id: str
    saga_id: str
    customer_id: str
    status: str
    total_amount: Decimal
    currency: str
    idempotency_key: str | None
    request_hash: str
    body: dict[str, Any]
    charge_id: str | None = None
    refund_status: str | None = None
    cancel_reason: str | None = None
    card_fingerprint: str | None = None
    payment_declined_at: datetime | None = None


@dataclass(frozen=True)
class HistoryRow:
    saga_id: str
    event_type: str
    actor: str
    from_status: str | None
    to_status: str | None
    message_id: str | None
    detail: dict[str, Any]


@dataclass(frozen=True)
class NotificationRow:
    order_id: str
    customer_id: str
    kind: str
    message: str


class OrderTables:
    """pedidos' orders, sagas, history and notifications, and the database clock."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
        self.sagas: dict[str, SagaState] = {}
        self.orders: dict[str, OrderRecord] = {}
        self.contexts: dict[str, dict[str, Any]] = {}
        self.history: list[HistoryRow] = []
        self.allocated_at: dict[str, datetime] = {}
        """sagas.stock_allocated_at, of the sagas that have one."""
        self.notifications: list[NotificationRow] = []
        self.operator_actions: list[tuple[str, OperatorAction]] = []
        """(saga id, action) of pedidos.operator_actions."""
        self.requests: dict[str, dict[str, Any]] = {}
        """An OrdenSolicitada payload pedidos' outbox keeps per saga, put there by a test."""
        self.outbox: list[Envelope] = []
        """The events of the units of work that committed, in the order they committed."""
        self.held: set[str] = set()
        """Sagas whose row another transaction holds locked."""
        self.locked_by: dict[str, FakeUnitOfWork] = {}
        """Sagas whose row a unit of work here locked (``lock``), until it ends."""
        self.reads = 0
        self.locks = 0
        self.holds: list[tuple[str, str, FakeUnitOfWork]] = []
        """(customer, card, unit of work) of each ``hold_orders_of``, in order."""

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def saga(self, saga_id: str) -> SagaState | None:
        """The saga row as a statement run now reads it."""
        saga = self.sagas.get(saga_id)
        return None if saga is None else dataclasses.replace(saga, db_now=self.now)

    def order_of(self, saga_id: str) -> OrderRecord:
        return self.orders[self.sagas[saga_id].order_id]

    def history_of(self, saga_id: str) -> list[HistoryRow]:
        return [h for h in self.history if h.saga_id == saga_id]

    def seed(self, status: OrderStatus, *, step_deadline_in_s: float | None = 30.0,
             expires_in_s: float = 7200.0, started_s_ago: float = 0.0,
             traceparent: str | None = None, stock_allocated: bool = False) -> SagaState:
        """A saga (and its order) that reached ``status``; its deadlines relative to now;
        ``stock_allocated``: a StockAsignado that came before the payment was recorded."""
        saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
        started = self.now - timedelta(seconds=started_s_ago)
        saga = SagaState(
            saga_id, order_id, ORDER_BODY["customer_id"], status, Decimal("10.00"), "USD",
            started, started,
            None if step_deadline_in_s is None else self.now + timedelta(seconds=step_deadline_in_s),
            self.now + timedelta(seconds=expires_in_s), self.now, stock_allocated)
        self.sagas[saga_id] = saga
        if stock_allocated:
            self.allocated_at[saga_id] = self.now
        self.orders[order_id] = OrderRecord(order_id, saga_id, saga.customer_id, status.value,
                                            saga.total_amount, saga.currency, None, "h",
                                            ORDER_BODY)
        self.contexts[saga_id] = {"traceparent": traceparent}
        return saga

    def move_elsewhere(self, saga_id: str, status: OrderStatus) -> None:
        """The saga moved by someone else (another instance, a deadline, a cancellation)."""
        self.sagas[saga_id] = dataclasses.replace(self.sagas[saga_id], status=status,
                                                  step_started_at=self.now, db_now=self.now)
        self.order_of(saga_id).status = status.value

    def allocate_elsewhere(self, saga_id: str) -> None:
        """An early StockAsignado recorded by someone else (another lane or instance)."""
        self.sagas[saga_id] = dataclasses.replace(self.sagas[saga_id], stock_allocated=True)
        self.allocated_at[saga_id] = self.now


class FakeUnitOfWork(fakes.FakeUnitOfWork):
    """sagakit's in-memory unit of work, with the one staged write pedidos' store gives it:
    run at commit, its guard deciding what ``commit`` returns."""

    def __init__(self, tables: OrderTables | None = None) -> None:
        super().__init__("pedidos")
        self._tables = tables
        self._staged: Callable[[], bool] | None = None
        self.fail_commit: BaseException | None = None
        """Raised by ``commit`` before anything is written (a connection lost)."""

    def stage(self, write: Callable[[], bool]) -> None:
        if self._staged is not None:
            raise RuntimeError("a unit of work stages one write")
        self._staged = write

    async def commit(self) -> bool:
        if self.fail_commit is not None:
            self.commits += 1
            raise self.fail_commit
        self.commit_result = self._staged() if self._staged is not None else True
        committed = await super().commit()
        if committed and self._tables is not None:
            self._tables.outbox.extend(self.emitted)
        self.unlock()
        return committed

    def unlock(self) -> None:
        """The unit of work ended: the rows it locked are free."""
        if self._tables is not None:
            locked = self._tables.locked_by
            for saga_id in [k for k, unit in locked.items() if unit is self]:
                del locked[saga_id]


class FakeOrderStore:
    """``OrderStore`` on ``tables``, staging its writes on ``uow``. ``stale``: sagas its first
    read of each answers as given, not as the tables hold them now (a read that another
    instance's write overtook, or a process's memory of its own last write)."""

    def __init__(self, tables: OrderTables, uow: FakeUnitOfWork,
                 stale: Iterable[SagaState] = ()) -> None:
        self.tables = tables
        self.uow = uow
        self._written: SagaState | None = None
        self._stale = {saga.saga_id: saga for saga in stale}

    def add(self, *, order_id: uuid.UUID, saga_id: uuid.UUID, body: dict[str, Any],
            total: Decimal, idempotency_key: str | None, request_hash: str,
            card_fingerprint: str, context: dict[str, Any], step_timeout_s: float,
            saga_timeout_s: float, audit: AuditEntry) -> None:
        t = self.tables

        def write() -> bool:
            if idempotency_key is not None and any(
                    (o.customer_id, o.idempotency_key) == (body["customer_id"], idempotency_key)
                    for o in t.orders.values()):
                return False
            first = OrderStatus.PENDIENTE_VALIDACION
            saga = SagaState(str(saga_id), str(order_id), body["customer_id"], first, total,
                             body["currency"], t.now, t.now,
                             t.now + timedelta(seconds=step_timeout_s),
                             t.now + timedelta(seconds=saga_timeout_s), t.now)
            t.sagas[saga.saga_id] = saga
            t.orders[saga.order_id] = OrderRecord(saga.order_id, saga.saga_id,
                                                  saga.customer_id, first.value, total,
                                                  body["currency"], idempotency_key,
                                                  request_hash, body,
                                                  card_fingerprint=card_fingerprint)
            t.contexts[saga.saga_id] = context
            t.history.append(HistoryRow(saga.saga_id, audit.event_type, audit.actor, None,
                                        first.value, audit.message_id, audit.detail or {}))
            self._written = saga
            return True

        self.uow.stage(write)

    def move(self, saga: SagaState, to: OrderStatus, *, step_timeout_s: float | None,
             audit: AuditEntry, notification: str | None = None,
             operator_action: OperatorAction | None = None,
             step_deadline_by: datetime | None = None, **order_values: Any) -> None:
        t = self.tables

        def write() -> bool:
            if not _guard_holds(t, saga):
                return False
            current = t.sagas[saga.saga_id]
            deadline = (None if step_timeout_s is None
                        else t.now + timedelta(seconds=step_timeout_s))
            detail = audit.detail or {}
            if deadline is not None and step_deadline_by is not None:
                deadline = min(deadline, step_deadline_by)
                detail = {**detail, "step_deadline_at": deadline.isoformat()}
            moved = dataclasses.replace(
                current, status=to, step_started_at=t.now, db_now=t.now,
                step_deadline_at=deadline)
            t.sagas[saga.saga_id] = moved
            order = t.orders[saga.order_id]
            order.status = to.value
            _set_columns(order, order_values)
            t.history.append(HistoryRow(saga.saga_id, audit.event_type, audit.actor,
                                        saga.status.value, to.value, audit.message_id,
                                        detail))
            if notification is not None:
                t.notifications.append(NotificationRow(saga.order_id, saga.customer_id,
                                                       to.value, notification))
            if operator_action is not None:
                t.operator_actions.append((saga.saga_id, operator_action))
            # As the adapter builds it: the caller's saga, with the row image's status and
            # clocks.
            self._written = dataclasses.replace(
                saga, status=to, started_at=moved.started_at,
                step_started_at=moved.step_started_at, step_deadline_at=moved.step_deadline_at,
                expires_at=moved.expires_at, db_now=t.now)
            return True

        self.uow.stage(write)

    def record_unmoved(self, saga: SagaState, audit: AuditEntry, **order_values: Any) -> None:
        t = self.tables

        def write() -> bool:
            if not _guard_holds(t, saga):
                return False
            _set_columns(t.orders[saga.order_id], order_values)
            t.history.append(HistoryRow(saga.saga_id, audit.event_type, audit.actor,
                                        saga.status.value, saga.status.value,
                                        audit.message_id, audit.detail or {}))
            return True

        self.uow.stage(write)

    def record_allocation(self, saga: SagaState, audit: AuditEntry) -> None:
        t = self.tables
        if saga.stock_allocated:
            raise ValueError(f"saga {saga.saga_id}: its allocation is recorded already")

        def write() -> bool:
            if not _guard_holds(t, saga):
                return False
            t.sagas[saga.saga_id] = dataclasses.replace(t.sagas[saga.saga_id],
                                                        stock_allocated=True)
            t.allocated_at[saga.saga_id] = t.now
            t.history.append(HistoryRow(saga.saga_id, audit.event_type, audit.actor,
                                        saga.status.value, saga.status.value,
                                        audit.message_id, audit.detail or {}))
            return True

        self.uow.stage(write)

    def written(self) -> SagaState:
        if self._written is None:
            raise RuntimeError("nothing that returns the saga was written")
        return self._written

    async def by_idempotency_key(self, customer_id: str, key: str) -> ExistingOrder | None:
        for o in self.tables.orders.values():
            if (o.customer_id, o.idempotency_key) == (customer_id, key):
                return ExistingOrder(o.order_id, o.saga_id, o.status, o.request_hash)
        return None

    async def hold_orders_of(self, customer_id: str, card_fingerprint: str) -> None:
        self.tables.holds.append((customer_id, card_fingerprint, self.uow))

    async def standing(self, *, customer_id: str, card_fingerprint: str, window_s: float,
                       customer_declines: int, card_declines: int, customer_waiting: int,
                       card_waiting: int) -> tuple[Standing, Standing]:
        if not any(unit is self.uow for _, _, unit in self.tables.holds):
            raise AssertionError("counted without holding the customer's and the card's orders")
        t = self.tables
        window = timedelta(seconds=window_s)

        def of(whose: Callable[[OrderRecord], bool], declines: int, waiting: int) -> Standing:
            mine = [o for o in t.orders.values() if whose(o)]
            declined = sorted((o.payment_declined_at for o in mine
                               if o.payment_declined_at is not None
                               and o.payment_declined_at > t.now - window), reverse=True)
            full_for = (None if len(declined) < declines else
                        (declined[declines - 1] + window - t.now).total_seconds())
            return Standing(min(waiting, sum(o.status in WAITING for o in mine)),
                            min(declines, len(declined)), full_for)

        return (of(lambda o: o.customer_id == customer_id, customer_declines, customer_waiting),
                of(lambda o: o.card_fingerprint == card_fingerprint, card_declines,
                   card_waiting))

    async def read(self, saga_id: str) -> SagaState | None:
        self.tables.reads += 1
        stale = self._stale.pop(saga_id, None)
        return stale if stale is not None else self.tables.saga(saga_id)

    async def order_request(self, saga_id: str) -> dict[str, Any] | None:
        if saga_id in self.tables.requests:
            return self.tables.requests[saga_id]
        return next((e.payload for e in self.tables.outbox
                     if e.saga_id == saga_id and e.event_type == "OrdenSolicitada"), None)

    async def lock(self, saga_id: str, skip_locked: bool = False) -> SagaState | None:
        self.tables.locks += 1
        holder = self.tables.locked_by.get(saga_id, self.uow)
        if saga_id in self.tables.held or holder is not self.uow:
            if skip_locked:
                return None
            raise AssertionError(f"would wait for saga {saga_id}'s lock")
        saga = self.tables.saga(saga_id)
        if saga is not None:
            self.tables.locked_by[saga_id] = self.uow
        return saga


def _guard_holds(tables: OrderTables, saga: SagaState) -> bool:
    """The adapter's guard: the saga row still shows the status and the allocation that
    ``saga`` was decided on."""
    current = tables.sagas.get(saga.saga_id)
    return (current is not None and current.status is saga.status
            and current.stock_allocated is saga.stock_allocated)


def _set_columns(order: OrderRecord, values: dict[str, Any]) -> None:
    for column, value in values.items():
        if column not in {"charge_id", "refund_status", "cancel_reason", "payment_declined_at"}:
            raise AssertionError(f"orders has no column {column} that a step sets")
        setattr(order, column, value)


class FakeDeadlines:
    """``Deadlines`` read from ``tables`` as the adapter's SQL reads them."""

    def __init__(self, tables: OrderTables) -> None:
        self.tables = tables
        self.traceparents_read: list[str] = []

    async def due(self, limit: int) -> DueSagas:
        now = self.tables.now
        active = [s for s in self.tables.sagas.values() if s.status in ACTIVE]
        due = sorted((s for s in active
                      if (s.step_deadline_at is not None and s.step_deadline_at <= now)
                      or s.expires_at <= now),
                     # PostgreSQL sorts NULLs last in an ascending order.
                     key=lambda s: (s.step_deadline_at is None, s.step_deadline_at or now))
        ids = [s.saga_id for s in due[:limit]]
        if len(ids) == limit:
            return DueSagas(ids, 0.0)
        to_come = [d for s in active for d in (s.step_deadline_at, s.expires_at)
                   if d is not None and d > now]
        return DueSagas(ids, (min(to_come) - now).total_seconds() if to_come else None)

    async def traceparent_of(self, saga_id: str) -> str | None:
        self.traceparents_read.append(saga_id)
        return self.tables.contexts.get(saga_id, {}).get("traceparent")


class FakeUnits:
    """``OrderUnits`` on ``tables``: each unit a new FakeUnitOfWork, kept in ``opened``."""

    def __init__(self, tables: OrderTables) -> None:
        self.tables = tables
        self.opened: list[FakeUnitOfWork] = []

    def __call__(self) -> AbstractAsyncContextManager[tuple[UnitOfWorkPort, OrderStore]]:
        return self._unit()

    @asynccontextmanager
    async def _unit(self) -> AsyncIterator[tuple[UnitOfWorkPort, OrderStore]]:
        uow = FakeUnitOfWork(self.tables)
        self.opened.append(uow)
        try:
            yield uow, FakeOrderStore(self.tables, uow)
        finally:
            uow.unlock()


def unit(tables: OrderTables, stale: Iterable[SagaState] = ()
         ) -> tuple[FakeUnitOfWork, FakeOrderStore]:
    uow = FakeUnitOfWork(tables)
    return uow, FakeOrderStore(tables, uow, stale)


def event(event_type: str, saga: SagaState, payload: dict[str, Any] | None = None,
          source: str = "inventario") -> Message[Any]:
    """An event of ``saga`` as a participant emits it and the tracker gets it: a payload its
    schema accepts, ``payload`` replacing its fields. A PagoExitoso pays the seeded order's
    total (10.00 USD) unless ``payload`` says otherwise."""
    return message(event_type, saga.saga_id, payload_of(event_type, saga.order_id,
                                                        **(payload or {})), source)
