"""What pedidos' use cases ask of storage, in the saga's terms, and of the key that seals the
payment token (``PaymentTokenSealer``).

The use cases depend on these protocols and on ``sagakit.ports.UnitOfWorkPort``, never on SQL:
``pedidos.adapters`` implements them on PostgreSQL, ``services/pedidos/tests/unit/fakes.py`` in
memory. A write is *staged*: it happens when the unit of work commits, with the events, and
only if the saga is still as it was decided on (its guard: its status, and whether its stock
was recorded as allocated); otherwise nothing of the unit of work is written and ``commit``
returns False.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from pedidos.domain.order import OrderStatus
from saga_contracts.sealing import Binding
from sagakit.ports import UnitOfWorkPort


class PaymentTokenSealer(Protocol):
    """Seals an order's payment token for pagos (``saga_contracts.sealing.SealingKey``)."""

    def seal(self, token: str, charge: Binding) -> str:
        """``token`` sealed for pagos, bound to ``charge``: ciphertext only pagos opens, and
        only for that charge."""
        ...


@dataclass(frozen=True)
class SagaState:
    """A saga and its order as read, or as a commit of this process left them: what a decision
    is taken on. ``db_now`` is the database clock when it was read or written, the clock its
    deadlines are judged by. A write decided on it is guarded by its ``status`` and its
    ``stock_allocated``, the two facts the decisions depend on."""

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
    stock_allocated: bool = False
    """A StockAsignado came before the payment and was recorded (``record_allocation``)."""

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


@dataclass(frozen=True)
class OperatorAction:
    """What an operator did through the API, for the operator actions' audit: written with the
    action it records, or not at all."""

    operator: str
    """The operator's token subject."""
    action: str
    reason: str | None
    detail: dict[str, Any] | None = None


@dataclass(frozen=True)
class ExistingOrder:
    """An order placed before under an idempotency key, with the fingerprint of its body."""

    order_id: str
    saga_id: str
    status: str
    request_hash: str


@dataclass(frozen=True)
class DueSagas:
    saga_ids: list[str]
    """Active sagas past a deadline, earliest step deadline first."""
    seconds_to_next: float | None
    """Until the earliest deadline still to come falls due (None: there is none; 0 when the
    limit was reached: more sagas may be due already)."""


@dataclass(frozen=True)
class Standing:
    """One customer's, or one card's, orders as the limits of ``POST /orders`` count them
    (pedidos.usecases.decline_velocity), each count only as far as the limits ask."""

    waiting: int
    """Orders waiting for their payment: placed, their payment not decided yet."""
    declines: int
    """Payments declined within the window."""
    full_for_s: float | None
    """With ``declines`` at the limit asked: until the oldest of those leaves the window."""


class OrderStore(Protocol):
    """Orders and their sagas, on one unit of work; at most one write staged per unit."""

    def add(self, *, order_id: uuid.UUID, saga_id: uuid.UUID, body: dict[str, Any],
            total: Decimal, idempotency_key: str | None, request_hash: str,
            card_fingerprint: str, context: dict[str, Any], step_timeout_s: float,
            saga_timeout_s: float, audit: AuditEntry) -> None:
        """Stages the order with its saga (PENDIENTE_VALIDACION) and first history entry. Its
        guard: the order's customer did not use the idempotency key before (else nothing is
        written)."""
        ...

    def move(self, saga: SagaState, to: OrderStatus, *, step_timeout_s: float | None,
             audit: AuditEntry, notification: str | None = None,
             operator_action: OperatorAction | None = None,
             step_deadline_by: datetime | None = None, **order_values: Any) -> None:
        """Stages the saga and its order moving to ``to`` (the order's columns
        ``order_values`` set; ``to`` may be its status, which starts its step afresh), its
        history entry, the customer's ``notification`` and the ``operator_action`` that moved
        it, if any. The step it starts falls due ``step_timeout_s`` from now, or at
        ``step_deadline_by`` if that is earlier (the history entry then says when). Its guard:
        the saga is still in ``saga.status`` (and ``saga.stock_allocated``)."""
        ...

    def record_unmoved(self, saga: SagaState, audit: AuditEntry, **order_values: Any) -> None:
        """Stages an event recorded in the saga's history without moving it (the order's
        columns ``order_values`` set). Its guard: the saga is still in ``saga.status`` (and
        ``saga.stock_allocated``)."""
        ...

    def record_allocation(self, saga: SagaState, audit: AuditEntry) -> None:
        """Stages the saga's stock recorded as allocated (a StockAsignado that came before the
        payment) without moving it, and its history entry. Its guard: the saga is still in
        ``saga.status`` and its allocation not recorded yet."""
        ...

    def written(self) -> SagaState:
        """The saga as the commit left it, after ``add`` or ``move`` committed."""
        ...

    async def hold_orders_of(self, customer_id: str, card_fingerprint: str) -> None:
        """Until the unit of work ends, no other unit of work that holds this customer's orders,
        or this card's, goes on: what it counts of them stays true until its order is added
        (or it gives up). Begins the unit of work's transaction."""
        ...

    async def standing(self, *, customer_id: str, card_fingerprint: str, window_s: float,
                       customer_declines: int, card_declines: int, customer_waiting: int,
                       card_waiting: int) -> tuple[Standing, Standing]:
        """The customer's and the card's ``Standing``: declines within the last ``window_s``
        counted up to ``*_declines``, orders waiting up to ``*_waiting``."""
        ...

    async def by_idempotency_key(self, customer_id: str, key: str) -> ExistingOrder | None:
        """The order ``customer_id`` placed under ``key``, if any."""
        ...

    async def read(self, saga_id: str) -> SagaState | None:
        """The saga without a lock: as it is now, or as this process's own last write of it
        left it (``pedidos.adapters.known_sagas``). Either may be stale by the time a write
        decided on it commits; that write's guard then finds it moved."""
        ...

    async def order_request(self, saga_id: str) -> dict[str, Any] | None:
        """The payload of the OrdenSolicitada that started the saga, as pedidos emitted it (its
        payment token sealed; the first version it published), if pedidos still keeps it."""
        ...

    async def lock(self, saga_id: str, skip_locked: bool = False) -> SagaState | None:
        """The saga, locked until the unit of work ends (saga first, then its order: ADR 0009);
        with ``skip_locked``, None if another transaction holds it."""
        ...


class Deadlines(Protocol):
    """The sagas' deadlines, read outside any unit of work."""

    async def due(self, limit: int) -> DueSagas:
        ...

    async def traceparent_of(self, saga_id: str) -> str | None:
        """The trace context the saga was started in, for the work its timers do."""
        ...


OrderUnits = Callable[[], AbstractAsyncContextManager[tuple[UnitOfWorkPort, OrderStore]]]
"""Opens a unit of work with the order store on it (``async with units() as (uow, orders)``)."""
