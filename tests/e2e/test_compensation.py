"""docs/standard.md#tests-the-standard-asks-for: inventario's compensation, driven by events
injected on Kafka.

It reads inventario's allocations, inbox and outbox, where the effect of an injected event shows
(there is no HTTP view of them), and deletes a product to compensate one that no longer exists."""

from __future__ import annotations

import uuid

from saga_harness import db, sealing
from saga_harness.clients import Saga, new_sku
from saga_harness.kafka import TopicReader, envelope, headers_of, produce
from saga_harness.waiting import wait_for


def _order(saga_id: str, order_id: str, sku: str, qty: int) -> dict:
    event = envelope("OrdenSolicitada", {
        "order_id": order_id, "customer_id": "c-comp",
        "items": [{"sku": sku, "quantity": qty, "price": "1.00"}], "total_amount": f"{qty}.00",
        "currency": "USD",
        "shipping_address": {"street": "s", "city": "c", "country": "PE", "postal_code": "1"},
        "payment_method": {"type": "credit_card", "token": sealing.stack_sealed(
            "tok_visa", sealing.charge(saga_id=saga_id, order_id=order_id,
                                       amount=f"{qty}.00", customer_id="c-comp"))}},
        saga_id=saga_id, source="pedidos")
    # As pedidos names the customer: pagos opens the token only for the customer it is sealed for.
    event["metadata"]["user_id"] = "c-comp"
    return event


def _paid(saga_id: str, order_id: str, qty: int) -> dict:
    return envelope("PagoExitoso", {"order_id": order_id, "payment_id": str(uuid.uuid4()),
                                    "charge_id": "ch_test", "amount": f"{qty}.00",
                                    "currency": "USD"}, saga_id=saga_id, source="pagos")


def _cancelled(saga_id: str, order_id: str) -> dict:
    return envelope("OrdenCancelada", {"order_id": order_id, "status": "CANCELADA_POR_USUARIO",
                                       "reason": "cancelada_por_usuario"},
                    saga_id=saga_id, source="pedidos")


async def _allocation(saga_id: str) -> str | None:
    return await db.fetchval("SELECT status FROM inventario.allocations WHERE saga_id = $1",
                             saga_id)


async def _allocate(saga: Saga, sku: str, qty: int) -> tuple[str, str]:
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    await produce("order-events", _order(saga_id, order_id, sku, qty))
    await wait_for(lambda: db.fetchval("SELECT result FROM inventario.stock_checks "
                                       "WHERE saga_id = $1", saga_id),
                   lambda r: r == "verified", timeout=10, what="validated")
    await produce("payment-events", _paid(saga_id, order_id, qty))
    await wait_for(lambda: _allocation(saga_id), lambda s: s == "ALLOCATED", timeout=10,
                   what="allocated")
    return saga_id, order_id


async def test_compensation_puts_back_what_was_allocated(saga: Saga) -> None:
    sku = new_sku("SKU-999")
    await saga.set_stock(sku, 100, price="1.00")
    saga_id, order_id = await _allocate(saga, sku, 5)
    assert await saga.stock(sku) == 95
    async with TopicReader("inventory-events") as out:
        await produce("order-events", _cancelled(saga_id, order_id))
        released = await out.wait_for(lambda r: headers_of(r).get("X-Saga-ID") == saga_id
                                      and headers_of(r).get("X-Event-Type") == "StockLiberado")
    assert await saga.stock(sku) == 100
    assert headers_of(released)["X-Source-Service"] == "inventario"
    assert await _allocation(saga_id) == "RELEASED"


async def test_compensating_twice_releases_once(saga: Saga) -> None:
    sku = new_sku("SKU-999")
    await saga.set_stock(sku, 10, price="1.00")
    saga_id, order_id = await _allocate(saga, sku, 4)
    first, second = _cancelled(saga_id, order_id), _cancelled(saga_id, order_id)
    await produce("order-events", first)
    await produce("order-events", second)
    await wait_for(lambda: db.fetchval("SELECT count(*) FROM inventario.processed_messages "
                                       "WHERE message_id = $1", second["message_id"]),
                   lambda n: n == 1, timeout=10, what="second compensation consumed")
    assert await saga.stock(sku) == 10
    assert await db.fetchval("SELECT count(*) FROM inventario.outbox WHERE saga_id = $1 "
                             "AND event_type = 'StockLiberado'", saga_id) == 1


async def test_compensating_what_never_happened_is_a_no_op_and_blocks_it(saga: Saga) -> None:
    sku = new_sku("SKU-999")
    await saga.set_stock(sku, 10, price="1.00")
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    await produce("order-events", _cancelled(saga_id, order_id))
    await wait_for(lambda: _allocation(saga_id), lambda s: s == "BLOCKED", timeout=10,
                   what="blocked")
    assert await saga.stock(sku) == 10
    # The late action it compensated arrives after all: it must not happen.
    await produce("order-events", _order(saga_id, order_id, sku, 3))
    late = _paid(saga_id, order_id, 3)
    await produce("payment-events", late)
    await wait_for(lambda: db.fetchval("SELECT count(*) FROM inventario.processed_messages "
                                       "WHERE message_id = $1", late["message_id"]),
                   lambda n: n == 1, timeout=10, what="late payment consumed")
    assert await saga.stock(sku) == 10
    assert await _allocation(saga_id) == "BLOCKED"
    assert await db.fetchval("SELECT count(*) FROM inventario.outbox WHERE saga_id = $1 AND "
                             "event_type IN ('StockLiberado', 'StockAsignado')", saga_id) == 0


async def test_compensating_a_product_that_no_longer_exists(saga: Saga) -> None:
    sku = new_sku("SKU-999")
    await saga.set_stock(sku, 6, price="1.00")
    saga_id, order_id = await _allocate(saga, sku, 2)
    await db.execute("DELETE FROM inventario.products WHERE sku = $1", sku)
    await produce("order-events", _cancelled(saga_id, order_id))
    await wait_for(lambda: _allocation(saga_id), lambda s: s == "RELEASED", timeout=10,
                   what="released")
    # The units come back as a product of their own rather than being lost.
    assert await saga.stock(sku) == 2
