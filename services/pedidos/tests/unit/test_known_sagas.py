"""The sagas this process wrote last (pedidos.adapters.known_sagas), around the in-memory store:
a saga placed and moved through it is decided on without a read; a saga moved elsewhere since
(another instance, a deadline, a cancellation) fails the guard of the write decided on it,
nothing is written, and the consumer's retry reads it; what a failed commit left is not known;
a lock always reads the row."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from pedidos.adapters.known_sagas import CachedSagaReads, KnownSagas
from pedidos.config import PedidosSettings
from pedidos.domain.order import OrderStatus
from pedidos.usecases.cancel_saga import cancel_saga
from pedidos.usecases.fingerprints import Fingerprints
from pedidos.usecases.place_order import place_order
from pedidos.usecases.ports import SagaState
from pedidos.usecases.track_saga import track_saga
from saga_harness import sealing
from sagakit.context import current_message
from sagakit.message import Message

from .fakes import ORDER_BODY, FakeOrderStore, FakeUnitOfWork, OrderTables, event

S = OrderStatus


def _row(saga_id: str, status: str) -> SagaState:
    now = datetime.now(UTC)
    return SagaState(saga_id, "o", "c", OrderStatus(status), Decimal("1.00"), "USD", now, now,
                     None, now, now)


def test_known_sagas_keeps_the_most_recent_and_drops_terminal_ones() -> None:
    known = KnownSagas(capacity=2)
    rows = {name: _row(name, "PENDIENTE_PAGO") for name in ("a", "b", "c")}
    known.remember(rows["a"])
    known.remember(rows["b"])
    known.remember(rows["a"])  # a is now the most recent
    known.remember(rows["c"])
    assert (known.get("a"), known.get("b"), known.get("c")) == (rows["a"], None, rows["c"])
    known.remember(_row("a", "COMPLETADA"))
    assert known.get("a") is None and len(known) == 1


def _unit(tables: OrderTables, known: KnownSagas) -> tuple[FakeUnitOfWork, CachedSagaReads]:
    uow = FakeUnitOfWork(tables)
    return uow, CachedSagaReads(FakeOrderStore(tables, uow), uow, known)


@contextmanager
def _handling(message: Message[Any]) -> Iterator[None]:
    token = current_message.set(message.envelope)
    try:
        yield
    finally:
        current_message.reset(token)


async def _track(tables: OrderTables, known: KnownSagas, message: Message[Any]
                 ) -> FakeUnitOfWork:
    uow, orders = _unit(tables, known)
    with _handling(message):
        await track_saga(uow, orders, message, PedidosSettings())
    return uow


async def _place(tables: OrderTables, known: KnownSagas) -> SagaState:
    uow, orders = _unit(tables, known)
    placed = await place_order(uow, orders, ORDER_BODY, Decimal("10.00"), None,
                               PedidosSettings(), sealer=sealing.sealing_key(),
                               fingerprints=Fingerprints(b"a test fingerprint key, 32 bytes+"))
    return tables.sagas[placed.saga_id]


def _paid(saga: SagaState, charge: str = "ch_1") -> Message[Any]:
    return event("PagoExitoso", saga, {"charge_id": charge}, source="pagos")


async def test_a_saga_placed_and_moved_here_is_never_read_back() -> None:
    tables, known = OrderTables(), KnownSagas()
    saga = await _place(tables, known)
    assert known.get(saga.saga_id) == tables.sagas[saga.saga_id], "known as its insert left it"

    assert (await _track(tables, known, event("StockVerificado", saga))).committed
    remembered = known.get(saga.saga_id)
    assert remembered is not None and remembered.status is S.PENDIENTE_PAGO
    assert remembered.step_deadline_at == tables.sagas[saga.saga_id].step_deadline_at
    assert (await _track(tables, known, _paid(saga))).committed
    assert (await _track(tables, known, event("StockAsignado", saga))).committed

    assert tables.reads == 0, "every event decided on the row this process's last write left"
    assert tables.sagas[saga.saga_id].status is S.COMPLETADA
    assert known.get(saga.saga_id) is None, "a terminal saga is not kept"


async def test_an_event_recorded_without_a_move_keeps_the_saga_known() -> None:
    tables, known = OrderTables(), KnownSagas()
    saga = tables.seed(S.PENDIENTE_ASIGNACION)
    assert (await _track(tables, known, event("StockVerificado", saga))).committed
    assert tables.reads == 1 and known.get(saga.saga_id) == saga, (
        "the row it was judged on still holds")


async def test_an_allocation_before_the_payment_is_known_and_the_payment_needs_no_read(
        ) -> None:
    tables, known = OrderTables(), KnownSagas()
    saga = tables.seed(S.PENDIENTE_PAGO)
    await _track(tables, known, event("StockAsignado", saga))
    remembered = known.get(saga.saga_id)
    assert remembered is not None and remembered.stock_allocated

    paid = await _track(tables, known, _paid(saga))

    assert paid.committed and tables.reads == 1, "decided on the saga as the allocation left it"
    assert tables.sagas[saga.saga_id].status is S.COMPLETADA
    assert paid.emitted_types == ["OrdenCompletada"]


async def test_a_stale_saga_costs_a_retry_never_a_wrong_write() -> None:
    """Known as PENDIENTE_PAGO, cancelled since by another instance: the payment decided on the
    memory finds its guard gone, writes nothing and forgets the saga; the retry reads it and
    records the late payment without moving it."""
    tables, known = OrderTables(), KnownSagas()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    await _track(tables, known, event("StockVerificado", saga))
    assert tables.reads == 1
    tables.move_elsewhere(saga.saga_id, S.CANCELADA_POR_USUARIO)
    history = len(tables.history)

    stale = await _track(tables, known, _paid(saga, "ch_2"))

    assert stale.commits == 1 and not stale.committed and stale.emitted == []
    assert len(tables.history) == history and tables.order_of(saga.saga_id).charge_id is None
    assert known.get(saga.saga_id) is None and tables.reads == 1

    retry = await _track(tables, known, _paid(saga, "ch_2"))
    assert retry.committed and tables.reads == 2
    assert tables.sagas[saga.saga_id].status is S.CANCELADA_POR_USUARIO
    assert tables.history[-1].detail["ignored"] is True
    assert tables.order_of(saga.saga_id).charge_id == "ch_2"


async def test_a_payment_decided_on_a_known_unallocated_saga_is_decided_again() -> None:
    """Known unallocated; another instance recorded the allocation since. The payment's write
    finds the allocation changed: nothing written; the retry reads the saga and completes it."""
    tables, known = OrderTables(), KnownSagas()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    await _track(tables, known, event("StockVerificado", saga))
    tables.allocate_elsewhere(saga.saga_id)

    stale = await _track(tables, known, _paid(saga))
    assert not stale.committed and tables.sagas[saga.saga_id].status is S.PENDIENTE_PAGO
    assert known.get(saga.saga_id) is None

    retry = await _track(tables, known, _paid(saga))
    assert retry.committed and tables.sagas[saga.saga_id].status is S.COMPLETADA
    assert retry.emitted_types == ["OrdenCompletada"]


async def test_a_commit_that_fails_forgets_the_saga() -> None:
    tables, known = OrderTables(), KnownSagas()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    known.remember(saga)
    uow, orders = _unit(tables, known)
    uow.fail_commit = ConnectionResetError("database went away")
    verified = event("StockVerificado", saga)
    with _handling(verified), pytest.raises(ConnectionResetError):
        await track_saga(uow, orders, verified, PedidosSettings())
    assert known.get(saga.saga_id) is None, "what the commit left is not known"


async def test_a_lock_reads_the_row_and_its_write_is_known_as_committed() -> None:
    """A cancellation decides under the saga's lock, on the row, not on the memory of it; what
    it commits is what the next event is decided on."""
    tables, known = OrderTables(), KnownSagas()
    saga = tables.seed(S.PENDIENTE_VALIDACION)
    known.remember(saga)
    tables.move_elsewhere(saga.saga_id, S.PENDIENTE_ASIGNACION)
    uow, orders = _unit(tables, known)

    await cancel_saga(uow, orders, saga.saga_id, "api", PedidosSettings())

    assert tables.locks == 1 and tables.reads == 0
    assert tables.history_of(saga.saga_id)[-1].from_status == "PENDIENTE_ASIGNACION"
    assert known.get(saga.saga_id) is None, "cancelled: terminal, not kept"
