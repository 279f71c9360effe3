"""An order completes only once pedidos has seen both its PagoExitoso and its StockAsignado, in
either order (they travel on different topics), with exactly one OrdenCompletada.

A StockAsignado that comes before the payment moves nothing: the saga records the allocation
and waits for the payment under its deadline. So a StockAsignado written by whoever holds
inventario's principal cannot complete an order that was never paid, or whose payment was
declined. The two events may also be handled at once (two lanes of one process, or two
instances): each is decided on the row it read, and the one that commits second finds its
guard gone and is decided again on the row as the first left it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pedidos.config import PedidosSettings
from pedidos.domain.order import OrderStatus
from pedidos.usecases.enforce_deadlines import enforce_deadline
from pedidos.usecases.ports import SagaState
from pedidos.usecases.track_saga import track_saga
from sagakit.context import current_message
from sagakit.envelope import Envelope
from sagakit.message import Message

from .fakes import FakeDeadlines, FakeOrderStore, FakeUnitOfWork, FakeUnits, OrderTables, event

S = OrderStatus


@contextmanager
def handling(message: Message[Any]) -> Iterator[None]:
    """As the consumer runs a handler: the message being handled is the events' cause."""
    token = current_message.set(message.envelope)
    try:
        yield
    finally:
        current_message.reset(token)


def _participant_event(event_type: str, saga: SagaState) -> Message[Any]:
    source = "pagos" if event_type.startswith("Pago") else "inventario"
    return event(event_type, saga, {"charge_id": "ch_1"} if event_type == "PagoExitoso" else None,
                 source=source)


async def _track(tables: OrderTables, message: Message[Any],
                 store: type[FakeOrderStore] = FakeOrderStore,
                 stale: tuple[SagaState, ...] = ()) -> FakeUnitOfWork:
    """The handler once; ``stale``: sagas it reads as given, changed since (``FakeOrderStore``)."""
    uow = FakeUnitOfWork()
    with handling(message):
        await track_saga(uow, store(tables, uow, stale), message, PedidosSettings())
    return uow


async def _consume(tables: OrderTables, message: Message[Any]) -> list[Envelope]:
    """As the consumer does: the handler again at once while its guarded write finds the saga
    changed; what the committed run emitted."""
    for _ in range(3):
        uow = await _track(tables, message)
        if uow.committed:
            return uow.emitted
    raise AssertionError(f"{message.event_type} never committed")


def _completions(emitted: list[Envelope]) -> list[Envelope]:
    return [e for e in emitted if e.event_type == "OrdenCompletada"]


async def test_an_allocation_before_the_payment_is_recorded_and_the_order_waits() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    allocated = _participant_event("StockAsignado", saga)

    uow = await _track(tables, allocated)

    assert uow.committed and uow.emitted == [], "no OrdenCompletada without the payment"
    now = tables.sagas[saga.saga_id]
    assert now.status is S.PENDIENTE_PAGO and tables.order_of(saga.saga_id).status == (
        "PENDIENTE_PAGO")
    assert now.step_deadline_at == saga.step_deadline_at, "its deadline keeps running"
    assert now.stock_allocated and tables.allocated_at[saga.saga_id] == tables.now
    assert tables.notifications == []
    [entry] = tables.history_of(saga.saga_id)
    assert (entry.event_type, entry.actor, entry.from_status, entry.to_status, entry.message_id,
            entry.detail) == ("StockAsignado", "inventario", "PENDIENTE_PAGO", "PENDIENTE_PAGO",
                              allocated.message_id,
                              {"source_service": "inventario", "ignored": False,
                               "awaiting": "PagoExitoso"})


async def test_the_payment_after_the_allocation_completes_the_order() -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    await _track(tables, _participant_event("StockAsignado", saga))
    paid = _participant_event("PagoExitoso", saga)

    uow = await _track(tables, paid)

    assert uow.committed
    assert tables.sagas[saga.saga_id].status is S.COMPLETADA
    order = tables.order_of(saga.saga_id)
    assert (order.status, order.charge_id) == ("COMPLETADA", "ch_1")
    [completed] = uow.emitted
    assert completed.event_type == "OrdenCompletada" and completed.saga_id == saga.saga_id
    assert completed.payload == {"order_id": saga.order_id, "total_amount": "10.00",
                                 "currency": "USD"}
    assert completed.metadata["causation_id"] == paid.message_id
    assert [n.kind for n in tables.notifications] == ["COMPLETADA"]
    assert tables.history_of(saga.saga_id)[-1].to_status == "COMPLETADA"


_HAPPY = ("StockVerificado", "PagoExitoso", "StockAsignado")


@pytest.mark.parametrize("arrivals", [
    *itertools.permutations(_HAPPY),
    # Duplicates by meaning (new message ids), before and after each other.
    ("StockVerificado", "StockAsignado", "StockAsignado", "PagoExitoso", "StockAsignado"),
    ("StockVerificado", "StockAsignado", "PagoExitoso", "PagoExitoso"),
    ("PagoExitoso", "PagoExitoso", "StockVerificado", "StockAsignado", "StockAsignado"),
    ("StockAsignado", "StockVerificado", "StockAsignado", "PagoExitoso", "StockVerificado"),
], ids="-".join)
async def test_the_order_completes_once_in_every_order_of_arrival(
        arrivals: tuple[str, ...]) -> None:
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_VALIDACION)

    emitted: list[Envelope] = []
    for n, event_type in enumerate(arrivals, 1):
        emitted += await _consume(tables, _participant_event(event_type, saga))
        if not {"PagoExitoso", "StockAsignado"} <= set(arrivals[:n]):
            assert tables.sagas[saga.saga_id].status is not S.COMPLETADA, (
                "completed before both the payment and the allocation came")

    assert tables.sagas[saga.saga_id].status is S.COMPLETADA
    assert tables.order_of(saga.saga_id).status == "COMPLETADA"
    assert len(_completions(emitted)) == 1
    assert [n.kind for n in tables.notifications] == ["COMPLETADA"]


async def test_the_same_redelivered_allocation_is_not_recorded_twice() -> None:
    """A message handled again (its inbox row is the arbiter at commit) would be decided as a
    second allocation: nothing to record, the saga waits as it was."""
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    allocated = _participant_event("StockAsignado", saga)
    await _track(tables, allocated)
    first_at = tables.allocated_at[saga.saga_id]
    tables.advance(5)

    again = await _track(tables, allocated)

    assert again.committed and again.emitted == []
    assert tables.allocated_at[saga.saga_id] == first_at
    assert tables.sagas[saga.saga_id].status is S.PENDIENTE_PAGO
    assert tables.history_of(saga.saga_id)[-1].detail["ignored"] is True


@pytest.mark.parametrize("status", [S.PENDIENTE_VALIDACION, S.PENDIENTE_PAGO])
async def test_an_allocation_then_a_declined_payment_cancels_the_order(
        status: OrderStatus) -> None:
    """OrdenCancelada makes inventario release the stock it allocated."""
    tables = OrderTables()
    saga = tables.seed(status)
    allocated = await _track(tables, _participant_event("StockAsignado", saga))
    declined = await _track(tables, _participant_event("PagoRechazado", saga))

    assert allocated.emitted == []
    assert tables.sagas[saga.saga_id].status is S.CANCELADA_PAGO_RECHAZADO
    [cancelled] = declined.emitted
    assert (cancelled.event_type, cancelled.payload) == (
        "OrdenCancelada", {"order_id": saga.order_id, "status": "CANCELADA_PAGO_RECHAZADO",
                           "reason": "pago_rechazado"})

    # A forged or late PagoExitoso after that changes nothing: the order is terminal.
    late = await _track(tables, _participant_event("PagoExitoso", saga))
    assert late.emitted == [] and tables.sagas[saga.saga_id].status is (
        S.CANCELADA_PAGO_RECHAZADO)


async def test_an_allocation_whose_payment_never_comes_is_cancelled_by_the_deadline() -> None:
    """The payment step's deadline runs on: it cancels the order, and OrdenCancelada makes
    inventario release the stock."""
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO, step_deadline_in_s=60)
    await _track(tables, _participant_event("StockAsignado", saga))
    tables.advance(61)

    units = FakeUnits(tables)
    done = await enforce_deadline(FakeDeadlines(tables), units, PedidosSettings(), saga.saga_id)

    assert done == 1
    [uow] = units.opened
    assert uow.committed and tables.sagas[saga.saga_id].status is S.CANCELADA_TIMEOUT
    assert uow.emitted_types == ["StepTimedOut", "OrdenCancelada"]
    assert uow.emitted[1].payload == {"order_id": saga.order_id,
                                      "status": "CANCELADA_TIMEOUT", "reason": "timeout"}
    assert _completions(uow.emitted) == []


def _held_after_read() -> tuple[type[FakeOrderStore], asyncio.Event, asyncio.Event]:
    """A store that reads the saga, says so (``read_done``), then waits for ``go_on`` before
    the use case decides: another event commits between this one's read and its write."""
    read_done, go_on = asyncio.Event(), asyncio.Event()

    class HeldAfterRead(FakeOrderStore):
        async def read(self, saga_id: str) -> SagaState | None:
            row = await super().read(saga_id)
            read_done.set()
            await go_on.wait()
            return row

    return HeldAfterRead, read_done, go_on


@pytest.mark.parametrize("first", ["StockAsignado", "PagoExitoso"])
async def test_both_decided_on_the_same_row_complete_the_order_once(first: str) -> None:
    """Both events read the saga in PENDIENTE_PAGO, unallocated; ``first`` commits; the other's
    write finds the saga changed (its status, or its allocation), writes nothing, and its retry
    completes the order."""
    second = "PagoExitoso" if first == "StockAsignado" else "StockAsignado"
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    winner, loser = (_participant_event(t, saga) for t in (first, second))

    held, read_done, go_on = _held_after_read()
    losing = asyncio.create_task(_track(tables, loser, store=held))
    await asyncio.wait_for(read_done.wait(), 5)
    won = await _track(tables, winner)
    go_on.set()
    lost = await asyncio.wait_for(losing, 5)

    assert won.committed and won.emitted == []
    assert not lost.committed and lost.emitted == [], "decided on a row that changed"
    assert tables.sagas[saga.saga_id].status is not S.COMPLETADA

    retried = await _consume(tables, loser)

    assert tables.sagas[saga.saga_id].status is S.COMPLETADA
    assert len(_completions(retried)) == 1
    assert [n.kind for n in tables.notifications] == ["COMPLETADA"]
    assert tables.order_of(saga.saga_id).charge_id == "ch_1"


async def test_a_payment_decided_on_a_saga_read_unallocated_is_decided_again() -> None:
    """The payment read the saga unallocated; another instance recorded the allocation since.
    The payment's write finds the allocation changed: nothing written; the retry reads the saga
    and completes it."""
    tables = OrderTables()
    saga = tables.seed(S.PENDIENTE_PAGO)
    tables.allocate_elsewhere(saga.saga_id)
    paid = _participant_event("PagoExitoso", saga)

    stale = await _track(tables, paid, stale=(saga,))
    assert not stale.committed and tables.sagas[saga.saga_id].status is S.PENDIENTE_PAGO
    assert tables.order_of(saga.saga_id).charge_id is None

    retry = await _track(tables, paid)
    assert retry.committed and tables.sagas[saga.saga_id].status is S.COMPLETADA
    assert len(_completions(retry.emitted)) == 1
