"""The sagas this process wrote last, kept where the use cases do not see them: an ``OrderStore``
that answers a saga's read with the row this process's own last write of it returned.

A tracked event is decided on the saga it reads. Reading it from the database before every
guarded write cost pedidos a round trip per event (three per saga, one of them on the saga's
critical path), for a row that this process had itself written a moment before, in the common
case (ADR 0005). ``CachedSagaReads`` wraps the order store of a unit of work: each write staged
through it forgets the saga at once, and once the unit of work commits remembers it as the
commit left it; ``read`` answers from that memory when it can.

The entry is only a hint, never the truth: every write decided on a saga is guarded by the
status it names and by whether it shows the stock allocated before the payment, and neither
ever returns to a value it left (the machine only moves forward, an allocation is never
unrecorded). So an entry made stale by another instance, a deadline or a cancellation fails its
guard: nothing is written, the saga is no longer known (its write forgot it and never
committed), and the consumer's retry decides the event again on the row read from the database.
``lock`` always reads the database.

One ``KnownSagas`` per process: the composition root (pedidos.app) builds it and hands the
entry points ``cached_stores``, which put it around each unit of work's ``OrderRepository``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

from pedidos.adapters.order_repository import OrderRepository
from pedidos.domain.order import TERMINAL, OrderStatus
from pedidos.usecases.ports import (
    AuditEntry,
    ExistingOrder,
    OperatorAction,
    OrderStore,
    SagaState,
    Standing,
)
from sagakit.ports import UnitOfWorkPort
from sagakit.store import UnitOfWork

# Active sagas of one instance: a few hundred at saturation here, tens of thousands only behind
# a long outage, when reading a few rows back costs nothing that matters.
DEFAULT_CAPACITY = 10_000

OrderStores = Callable[[UnitOfWork], OrderStore]
"""The order store an entry point puts on a unit of work (``OrderRepository`` itself, or
``cached_stores``)."""


class KnownSagas:
    """A bounded LRU of sagas as this process's commits left them."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._rows: OrderedDict[str, SagaState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, saga_id: str) -> SagaState | None:
        return self._rows.get(saga_id)

    def remember(self, saga: SagaState) -> None:
        """``saga`` as a commit of this process left it. A terminal saga is not kept: nothing
        moves it any more, and a late event's annotation can read it."""
        if saga.status in TERMINAL:
            self._rows.pop(saga.saga_id, None)
            return
        self._rows[saga.saga_id] = saga
        self._rows.move_to_end(saga.saga_id)
        while len(self._rows) > self.capacity:
            self._rows.popitem(last=False)

    def forget(self, saga_id: str) -> None:
        self._rows.pop(saga_id, None)


class CachedSagaReads:
    """``store`` (an ``OrderStore`` on ``uow``), its saga reads answered from ``known`` when
    this process wrote the saga last, its writes kept in ``known`` once ``uow`` commits."""

    def __init__(self, store: OrderStore, uow: UnitOfWorkPort, known: KnownSagas) -> None:
        self._store = store
        self._uow = uow
        self._known = known

    def _staged(self, saga_id: str, written: Callable[[], SagaState]) -> None:
        # Until the write commits, what it leaves is not known: a write whose guard fails, or
        # a commit that fails, leaves the saga to be read again.
        self._known.forget(saga_id)
        self._uow.after_commit(lambda: self._known.remember(written()))

    def add(self, *, order_id: uuid.UUID, saga_id: uuid.UUID, body: dict[str, Any],
            total: Decimal, idempotency_key: str | None, request_hash: str,
            card_fingerprint: str, context: dict[str, Any], step_timeout_s: float,
            saga_timeout_s: float, audit: AuditEntry) -> None:
        self._store.add(order_id=order_id, saga_id=saga_id, body=body, total=total,
                        idempotency_key=idempotency_key, request_hash=request_hash,
                        card_fingerprint=card_fingerprint, context=context,
                        step_timeout_s=step_timeout_s, saga_timeout_s=saga_timeout_s,
                        audit=audit)
        self._staged(str(saga_id), self._store.written)

    def move(self, saga: SagaState, to: OrderStatus, *, step_timeout_s: float | None,
             audit: AuditEntry, notification: str | None = None,
             operator_action: OperatorAction | None = None,
             step_deadline_by: datetime | None = None, **order_values: Any) -> None:
        self._store.move(saga, to, step_timeout_s=step_timeout_s, audit=audit,
                         notification=notification, operator_action=operator_action,
                         step_deadline_by=step_deadline_by, **order_values)
        self._staged(saga.saga_id, self._store.written)

    def record_unmoved(self, saga: SagaState, audit: AuditEntry, **order_values: Any) -> None:
        self._store.record_unmoved(saga, audit, **order_values)
        # Its guard held: the row it was decided on is the row as it is.
        self._staged(saga.saga_id, lambda: saga)

    def record_allocation(self, saga: SagaState, audit: AuditEntry) -> None:
        self._store.record_allocation(saga, audit)
        self._staged(saga.saga_id, lambda: dataclasses.replace(saga, stock_allocated=True))

    def written(self) -> SagaState:
        return self._store.written()

    async def read(self, saga_id: str) -> SagaState | None:
        known = self._known.get(saga_id)
        return known if known is not None else await self._store.read(saga_id)

    async def lock(self, saga_id: str, skip_locked: bool = False) -> SagaState | None:
        return await self._store.lock(saga_id, skip_locked)

    async def hold_orders_of(self, customer_id: str, card_fingerprint: str) -> None:
        await self._store.hold_orders_of(customer_id, card_fingerprint)

    async def standing(self, *, customer_id: str, card_fingerprint: str, window_s: float,
                       customer_declines: int, card_declines: int, customer_waiting: int,
                       card_waiting: int) -> tuple[Standing, Standing]:
        return await self._store.standing(
            customer_id=customer_id, card_fingerprint=card_fingerprint, window_s=window_s,
            customer_declines=customer_declines, card_declines=card_declines,
            customer_waiting=customer_waiting, card_waiting=card_waiting)

    async def by_idempotency_key(self, customer_id: str, key: str) -> ExistingOrder | None:
        return await self._store.by_idempotency_key(customer_id, key)

    async def order_request(self, saga_id: str) -> dict[str, Any] | None:
        return await self._store.order_request(saga_id)


def cached_stores(known: KnownSagas) -> OrderStores:
    """``OrderRepository`` on each unit of work, behind ``CachedSagaReads`` on ``known``."""
    def store(uow: UnitOfWork) -> OrderStore:
        return CachedSagaReads(OrderRepository(uow), uow, known)

    return store
