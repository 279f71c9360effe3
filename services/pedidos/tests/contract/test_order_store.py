"""``OrderStore``'s contract (pedidos.usecases.ports), run on the in-memory fake and on
``OrderRepository`` over PostgreSQL: reads without locks, one write staged per unit of work and
written with its commit, events included, only if its guard holds (else nothing, and ``commit``
returns False), the first order under an idempotency key kept, a saga's lock skipped when
another transaction holds it, a customer's and a card's orders counted as the limits of
``POST /orders`` count them."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from pedidos.domain.order import OrderStatus
from pedidos.usecases.ports import AuditEntry, OperatorAction, SagaState, Standing
from saga_harness.events import PAYMENT_METHOD, orden_solicitada

from ..unit.fakes import ORDER_BODY
from .backends import OrderBackend

S = OrderStatus


async def _place(orders: OrderBackend, *, key: str | None = None, customer: str = "c-1",
                 step_timeout_s: float = 30, saga_timeout_s: float = 3600,
                 request_hash: str = "h-1", card: str = "fp-1"
                 ) -> tuple[bool, SagaState | None, str]:
    """An order placed as place_order places it, with its OrdenSolicitada: (committed, the
    saga as written, its saga id)."""
    order_id, saga_id = uuid.uuid4(), uuid.uuid4()
    body = {**ORDER_BODY, "customer_id": customer}
    request = orden_solicitada(("SKU-1", 2), saga_id=str(saga_id), order_id=str(order_id),
                               customer_id=customer, price="5.00", currency="USD")
    async with orders.unit() as (uow, store):
        store.add(order_id=order_id, saga_id=saga_id, body=body, total=Decimal("10.00"),
                  idempotency_key=key, request_hash=request_hash, card_fingerprint=card,
                  context={"traceparent": "00-abc-def-01"}, step_timeout_s=step_timeout_s,
                  saga_timeout_s=saga_timeout_s,
                  audit=AuditEntry("OrdenSolicitada", customer, "m-0", {"items": 1}))
        uow.emit(request.payload, saga_id=str(saga_id))
        committed = await uow.commit()
        return committed, store.written() if committed else None, str(saga_id)


async def _placed(orders: OrderBackend, **kwargs: Any) -> SagaState:
    committed, saga, _ = await _place(orders, **kwargs)
    assert committed and saga is not None
    return saga


async def _read(orders: OrderBackend, saga_id: str) -> SagaState | None:
    async with orders.unit() as (_, store):
        return await store.read(saga_id)


async def _move(orders: OrderBackend, saga: SagaState, to: OrderStatus, **kwargs: Any) -> bool:
    async with orders.unit() as (uow, store):
        store.move(saga, to, **{"step_timeout_s": 30, "audit": AuditEntry("Probe", "test"),
                                **kwargs})
        return await uow.commit()


def _facts(saga: SagaState) -> tuple[Any, ...]:
    """What a read and a write agree on (their ``db_now`` aside)."""
    return dataclasses.astuple(dataclasses.replace(saga, db_now=saga.started_at))


async def test_an_order_placed_is_read_as_written(orders: OrderBackend) -> None:
    saga = await _placed(orders, step_timeout_s=30, saga_timeout_s=3600)
    read = await _read(orders, saga.saga_id)
    assert read is not None and _facts(read) == _facts(saga)
    assert (read.status, read.customer_id, read.total_amount, read.currency,
            read.stock_allocated) == (S.PENDIENTE_VALIDACION, "c-1", Decimal("10.00"), "USD",
                                      False)
    assert read.step_started_at == read.started_at
    assert read.step_deadline_at is not None
    assert (read.step_deadline_at - read.started_at).total_seconds() == pytest.approx(30)
    assert (read.expires_at - read.started_at).total_seconds() == pytest.approx(3600)
    assert await orders.history(saga.saga_id) == [
        ("OrdenSolicitada", "c-1", None, "PENDIENTE_VALIDACION", "m-0", {"items": 1})]
    assert await orders.outbox(saga.saga_id) == ["OrdenSolicitada"]
    assert await _read(orders, str(uuid.uuid4())) is None


async def test_a_staged_write_shows_only_once_its_unit_commits(orders: OrderBackend) -> None:
    async with orders.unit() as (uow, store):
        saga_id = uuid.uuid4()
        store.add(order_id=uuid.uuid4(), saga_id=saga_id, body=ORDER_BODY,
                  total=Decimal("10.00"), idempotency_key=None, request_hash="h",
                  card_fingerprint="fp", context={}, step_timeout_s=30, saga_timeout_s=3600,
                  audit=AuditEntry("OrdenSolicitada", "c-1"))
        assert await _read(orders, str(saga_id)) is None
        assert await store.read(str(saga_id)) is None
        await uow.commit()
    assert await _read(orders, str(saga_id)) is not None

    async with orders.unit() as (uow, store):  # never committed: nothing written
        store.add(order_id=uuid.uuid4(), saga_id=(lost := uuid.uuid4()), body=ORDER_BODY,
                  total=Decimal("10.00"), idempotency_key=None, request_hash="h",
                  card_fingerprint="fp", context={}, step_timeout_s=30, saga_timeout_s=3600,
                  audit=AuditEntry("OrdenSolicitada", "c-1"))
    assert await _read(orders, str(lost)) is None
    assert await orders.history(str(lost)) == []


async def test_the_first_order_under_an_idempotency_key_is_kept(orders: OrderBackend) -> None:
    key = f"key-{uuid.uuid4()}"
    first = await _placed(orders, key=key, request_hash="first")
    committed, _, second = await _place(orders, key=key, request_hash="second")
    assert not committed
    assert await _read(orders, second) is None
    assert await orders.history(second) == [] and await orders.outbox(second) == []
    async with orders.unit() as (_, store):
        existing = await store.by_idempotency_key("c-1", key)
        assert existing is not None
        assert (existing.order_id, existing.saga_id, existing.status, existing.request_hash) == (
            first.order_id, first.saga_id, "PENDIENTE_VALIDACION", "first")
        assert await store.by_idempotency_key("c-2", key) is None
    # The key is the customer's: another customer's order under it is written.
    assert (await _place(orders, key=key, customer="c-2"))[0]


async def test_a_move_writes_saga_order_history_notification_and_action_together(
        orders: OrderBackend) -> None:
    saga = await _placed(orders)
    async with orders.unit() as (uow, store):
        store.move(saga, S.CANCELADA_POR_USUARIO, step_timeout_s=None,
                   audit=AuditEntry("Cancelada", "op-1", "m-1", {"why": "asked"}),
                   notification="cancelled", cancel_reason="cancelada_por_usuario",
                   operator_action=OperatorAction("op-1", "cancel", "asked", {"k": 1}))
        assert await uow.commit()
        written = store.written()
    assert (written.status, written.step_deadline_at) == (S.CANCELADA_POR_USUARIO, None)
    read = await _read(orders, saga.saga_id)
    assert read is not None and _facts(read) == _facts(written)
    assert read.step_started_at >= saga.step_started_at
    order = await orders.order(saga.saga_id)
    assert order is not None
    assert (order["status"], order["cancel_reason"]) == ("CANCELADA_POR_USUARIO",
                                                         "cancelada_por_usuario")
    assert (await orders.history(saga.saga_id))[-1] == (
        "Cancelada", "op-1", "PENDIENTE_VALIDACION", "CANCELADA_POR_USUARIO", "m-1",
        {"why": "asked"})
    assert await orders.notifications(saga.saga_id) == [("CANCELADA_POR_USUARIO", "cancelled")]
    assert await orders.operator_actions(saga.saga_id) == [("op-1", "cancel", "asked")]


async def test_a_move_starts_its_step_with_its_timeout(orders: OrderBackend) -> None:
    saga = await _placed(orders)
    async with orders.unit() as (uow, store):
        store.move(saga, S.PENDIENTE_PAGO, step_timeout_s=45, audit=AuditEntry("Probe", "t"),
                   charge_id="ch_1")
        assert await uow.commit()
        written = store.written()
    assert written.status is S.PENDIENTE_PAGO and written.step_deadline_at is not None
    assert (written.step_deadline_at - written.step_started_at).total_seconds() == (
        pytest.approx(45))
    assert written.expires_at == saga.expires_at and written.started_at == saga.started_at
    order = await orders.order(saga.saga_id)
    assert order is not None and (order["status"], order["charge_id"]) == (
        "PENDIENTE_PAGO", "ch_1")


async def test_a_move_decided_on_a_status_gone_writes_nothing_events_included(
        orders: OrderBackend) -> None:
    saga = await _placed(orders)
    async with orders.unit() as (uow, store):
        decided_on = await store.read(saga.saga_id)
        assert decided_on is not None
        assert await _move(orders, saga, S.PENDIENTE_PAGO)  # meanwhile, elsewhere
        store.move(decided_on, S.CANCELADA_SIN_STOCK, step_timeout_s=None,
                   audit=AuditEntry("StockNoDisponible", "inventario"),
                   notification="no stock", cancel_reason="sin_stock")
        uow.emit(orden_solicitada(("SKU-1", 1)).payload, saga_id=saga.saga_id)
        assert not await uow.commit()
    read = await _read(orders, saga.saga_id)
    assert read is not None and read.status is S.PENDIENTE_PAGO
    order = await orders.order(saga.saga_id)
    assert order is not None and (order["status"], order["cancel_reason"]) == (
        "PENDIENTE_PAGO", None)
    assert [h[0] for h in await orders.history(saga.saga_id)] == ["OrdenSolicitada", "Probe"]
    assert await orders.notifications(saga.saga_id) == []
    assert await orders.outbox(saga.saga_id) == ["OrdenSolicitada"]


async def test_an_allocation_is_recorded_once_without_moving_the_saga(
        orders: OrderBackend) -> None:
    saga = await _placed(orders)
    async with orders.unit() as (uow, store):
        store.record_allocation(saga, AuditEntry("StockAsignado", "inventario", "m-2"))
        assert await uow.commit()
    read = await _read(orders, saga.saga_id)
    assert read is not None and (read.status, read.stock_allocated) == (
        S.PENDIENTE_VALIDACION, True)
    assert (await orders.history(saga.saga_id))[-1][:5] == (
        "StockAsignado", "inventario", "PENDIENTE_VALIDACION", "PENDIENTE_VALIDACION", "m-2")

    # A second one decided on the saga as it was before the first is refused.
    async with orders.unit() as (uow, store):
        store.record_allocation(saga, AuditEntry("StockAsignado", "inventario", "m-3"))
        assert not await uow.commit()
    assert len(await orders.history(saga.saga_id)) == 2
    with pytest.raises(ValueError):
        async with orders.unit() as (uow, store):
            store.record_allocation(read, AuditEntry("StockAsignado", "inventario"))


async def test_a_write_decided_before_an_allocation_was_recorded_writes_nothing(
        orders: OrderBackend) -> None:
    saga = await _placed(orders)
    async with orders.unit() as (uow, store):
        store.record_allocation(saga, AuditEntry("StockAsignado", "inventario"))
        assert await uow.commit()
    assert not await _move(orders, saga, S.PENDIENTE_ASIGNACION)  # decided unallocated
    async with orders.unit() as (uow, store):
        store.record_unmoved(saga, AuditEntry("Probe", "test"))
        assert not await uow.commit()
    read = await _read(orders, saga.saga_id)
    assert read is not None
    assert await _move(orders, read, S.PENDIENTE_ASIGNACION)


async def test_an_event_recorded_unmoved_sets_the_orders_columns_only_if_still_current(
        orders: OrderBackend) -> None:
    saga = await _placed(orders)
    async with orders.unit() as (uow, store):
        store.record_unmoved(saga, AuditEntry("PagoExitoso", "pagos", "m-4"),
                             refund_status="pending")
        assert await uow.commit()
    read = await _read(orders, saga.saga_id)
    assert read is not None and read.status is S.PENDIENTE_VALIDACION
    order = await orders.order(saga.saga_id)
    assert order is not None and order["refund_status"] == "pending"
    assert (await orders.history(saga.saga_id))[-1][:5] == (
        "PagoExitoso", "pagos", "PENDIENTE_VALIDACION", "PENDIENTE_VALIDACION", "m-4")

    assert await _move(orders, saga, S.PENDIENTE_PAGO)
    async with orders.unit() as (uow, store):
        store.record_unmoved(saga, AuditEntry("Late", "pagos"), refund_status="done")
        assert not await uow.commit()
    order = await orders.order(saga.saga_id)
    assert order is not None and order["refund_status"] == "pending"
    assert [h[0] for h in await orders.history(saga.saga_id)][-1] == "Probe"


async def test_a_saga_locked_elsewhere_is_skipped_by_a_lock_that_skips(
        orders: OrderBackend) -> None:
    saga = await _placed(orders)
    async with orders.unit() as (_, store):
        locked = await store.lock(saga.saga_id, skip_locked=True)
        assert locked is not None and _facts(locked) == _facts(saga)
        assert await store.lock(str(uuid.uuid4())) is None
    async with orders.held(saga.saga_id), orders.unit() as (_, store):
        assert await store.lock(saga.saga_id, skip_locked=True) is None
        read = await store.read(saga.saga_id)  # a read takes no lock: it does not wait
        assert read is not None and read.status is S.PENDIENTE_VALIDACION


async def test_a_saga_one_unit_locked_is_skipped_by_another_until_it_ends(
        orders: OrderBackend) -> None:
    saga = await _placed(orders)
    async with orders.unit() as (uow, store):
        assert await store.lock(saga.saga_id) is not None
        async with orders.unit() as (_, other):
            assert await other.lock(saga.saga_id, skip_locked=True) is None
        assert await uow.commit()
    async with orders.unit() as (_, store):
        assert await store.lock(saga.saga_id, skip_locked=True) is not None


async def test_the_order_request_is_the_first_ordensolicitada_committed(
        orders: OrderBackend) -> None:
    saga = await _placed(orders)
    async with orders.unit() as (_, store):
        request = await store.order_request(saga.saga_id)
        assert await store.order_request(str(uuid.uuid4())) is None
    assert request is not None
    assert (request["order_id"], request["total_amount"], request["currency"]) == (
        saga.order_id, "10.00", "USD")
    assert request["payment_method"] == PAYMENT_METHOD, "as it was emitted, token sealed"


async def test_a_customers_and_a_cards_standing_counts_waiting_orders_and_recent_declines(
        orders: OrderBackend) -> None:
    customer, card = f"c-{uuid.uuid4().hex[:8]}", f"fp-{uuid.uuid4().hex[:8]}"
    await _placed(orders, customer=customer, card=card)  # waiting: its stock being checked
    checked = await _placed(orders, customer=customer, card=card)
    assert await _move(orders, checked, S.PENDIENTE_PAGO)  # waiting: its payment
    paid = await _placed(orders, customer=customer, card=card)
    assert await _move(orders, paid, S.PENDIENTE_ASIGNACION)
    declined_lately = await _placed(orders, customer=customer, card=card)
    assert await _move(orders, declined_lately, S.CANCELADA_PAGO_RECHAZADO,
                       payment_declined_at=declined_lately.db_now - timedelta(seconds=100))
    declined_long_ago = await _placed(orders, customer=customer, card=card)
    assert await _move(orders, declined_long_ago, S.CANCELADA_PAGO_RECHAZADO,
                       payment_declined_at=declined_long_ago.db_now - timedelta(seconds=900))
    cancelled = await _placed(orders, customer=customer, card=card)
    assert await _move(orders, cancelled, S.CANCELADA_POR_USUARIO)
    await _placed(orders, customer=f"{customer}-other", card=card)  # the card's only

    async def standing(declines: int, waiting: int) -> tuple[Standing, Standing]:
        async with orders.unit() as (_, store):
            await store.hold_orders_of(customer, card)
            return await store.standing(
                customer_id=customer, card_fingerprint=card, window_s=600,
                customer_declines=declines, card_declines=declines,
                customer_waiting=waiting, card_waiting=waiting)

    mine, the_cards = await standing(declines=5, waiting=10)
    assert (mine.waiting, mine.declines, mine.full_for_s) == (2, 1, None)
    assert (the_cards.waiting, the_cards.declines, the_cards.full_for_s) == (3, 1, None)
    # At the limit asked, until the decline leaves the window (600 s after it, by the clock
    # it was written by).
    mine, _ = await standing(declines=1, waiting=10)
    assert mine.declines == 1 and mine.full_for_s is not None
    assert 480 < mine.full_for_s <= 500
    # Each count stops at what is asked.
    mine, the_cards = await standing(declines=1, waiting=1)
    assert (mine.waiting, the_cards.waiting) == (1, 1)
    async with orders.unit() as (_, store):
        await store.hold_orders_of("nobody", "no card")
        nobody = await store.standing(customer_id="nobody", card_fingerprint="no card",
                                      window_s=600, customer_declines=1, card_declines=1,
                                      customer_waiting=1, card_waiting=1)
    assert nobody == (Standing(0, 0, None), Standing(0, 0, None))
