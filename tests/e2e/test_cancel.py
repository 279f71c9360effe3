"""POST /sagas/{id}/cancel in every non-terminal state, twice, and when there is nothing to cancel.

One case holds a row lock in inventario's database (``row_locked``) to keep an allocation
waiting: nothing in the public interfaces can hold a saga at that step."""

from __future__ import annotations

import uuid
from decimal import Decimal

from saga_harness import config
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import paused, row_locked
from saga_harness.waiting import wait_for


async def _cancel(saga: Saga, saga_id: str) -> tuple[int, dict]:
    r = await saga.http.post(f"{config.PEDIDOS}/sagas/{saga_id}/cancel",
                             json={"reason": "test: cancel in every state"})
    return r.status_code, r.json()


async def _settled_with_nothing_net(saga: Saga, saga_id: str, sku: str, stock: int) -> None:
    await saga.wait_no_net_charge(saga_id)
    await wait_for(lambda: saga.stock(sku), lambda q: q == stock, timeout=15,
                   what="stock back to where it was")


async def test_cancel_while_validating(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    with paused("inventario"):
        placed = await saga.place(order_body([(sku, 1)]))
        code, body = await _cancel(saga, placed["saga_id"])
        assert (code, body["status"]) == (202, "CANCELADA_POR_USUARIO")
    order = await saga.order(placed["order_id"])
    assert order["status"] == "CANCELADA_POR_USUARIO"
    await _settled_with_nothing_net(saga, placed["saga_id"], sku, 5)


async def test_cancel_while_the_charge_is_in_flight(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    placed = await saga.place(order_body([(sku, 2)], token="tok_slow"))
    await saga.wait_status(placed["order_id"], "PENDIENTE_PAGO")
    code, _ = await _cancel(saga, placed["saga_id"])
    assert code == 202
    # The slow charge went through at the gateway: pagos finds out and refunds it.
    await _settled_with_nothing_net(saga, placed["saga_id"], sku, 5)
    payments = await saga.payments(placed["saga_id"])
    assert [p["status"] for p in payments] in (["REFUNDED"], ["CANCELLED"])


async def test_cancel_after_payment_before_allocation(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    async with row_locked("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE", sku):
        placed = await saga.place(order_body([(sku, 2)]))
        await saga.wait_status(placed["order_id"], "PENDIENTE_ASIGNACION")
        code, body = await _cancel(saga, placed["saga_id"])
        assert (code, body["status"]) == (202, "CANCELADA_POR_USUARIO")
    # The allocation waiting on the lock may still happen: it is then released.
    await _settled_with_nothing_net(saga, placed["saga_id"], sku, 5)
    assert await saga.money_of(placed["saga_id"]) == (Decimal(0), 1, 1)
    order = await wait_for(lambda: saga.order(placed["order_id"]),
                           lambda o: o["refund_status"] == "REFUNDED", timeout=10,
                           what="the late refund is recorded on the order")
    assert order["status"] == "CANCELADA_POR_USUARIO"


async def test_cancel_twice_and_cancel_a_finished_saga(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    with paused("inventario"):
        placed = await saga.place(order_body([(sku, 1)]))
        first = await _cancel(saga, placed["saga_id"])
        second = await _cancel(saga, placed["saga_id"])
    assert first[0] == 202
    assert second == (409, {"detail": "saga is CANCELADA_POR_USUARIO: nothing to cancel",
                            "saga_id": placed["saga_id"], "status": "CANCELADA_POR_USUARIO"})
    done = await saga.place(order_body([(sku, 1)]))
    await saga.wait_status(done["order_id"], "COMPLETADA")
    assert (await _cancel(saga, done["saga_id"]))[0] == 409
    assert (await _cancel(saga, str(uuid.uuid4())))[0] == 404
    history = [e["event_type"] for e in await saga.history(placed["saga_id"])]
    assert history.count("CancelacionSolicitada") == 1
