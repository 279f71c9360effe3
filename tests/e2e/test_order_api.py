"""The order API's input validation and Idempotency-Key (bad input gets a 4xx and loses nothing).

It counts rows of pedidos' orders table (a refused request must leave none, and the API lists no
orders by customer) and reads the keys pagos stored for a payment."""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

import pytest

from saga_harness import config, db
from saga_harness.clients import Saga, new_sku, order_body


async def _orders_of(customer: str) -> int:
    return int(await db.fetchval("SELECT count(*) FROM pedidos.orders WHERE customer_id = $1",
                                 customer))


def _mutate(body: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    target = body
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return body


BAD = [
    (["items"], [], ["body", "items"]),
    (["items"], [{"sku": "A", "quantity": 1, "price": "1.00"}] * 51, ["body", "items"]),
    (["items", 0, "quantity"], 0, ["body", "items", 0, "quantity"]),
    (["items", 0, "quantity"], 1001, ["body", "items", 0, "quantity"]),
    (["items", 0, "price"], "-1.00", ["body", "items", 0, "price"]),
    (["items", 0, "price"], "1.234", ["body", "items", 0, "price"]),
    (["currency"], "XXX", ["body", "currency"]),
    (["shipping_address", "city"], ..., ["body", "shipping_address", "city"]),
    (["payment_method", "token"], ..., ["body", "payment_method", "token"]),
    (["payment_method", "type"], "bitcoin", ["body", "payment_method", "type"]),
    (["surprise"], "field", ["body", "surprise"]),
    (["total_amount"], "999.99", ["body"]),
]


@pytest.mark.parametrize(("path", "value", "loc"), BAD)
async def test_bad_request_is_refused_field_by_field_and_creates_nothing(
        saga: Saga, path: list[Any], value: Any, loc: list[Any]) -> None:
    customer = f"bad-{uuid.uuid4().hex[:8]}"
    body = _mutate(order_body([("SKU-X", 1)], customer=customer), path, value)
    r = await saga.http.post(f"{config.PEDIDOS}/orders", json=body)
    assert r.status_code == 422, r.text
    locs = [e["loc"] for e in r.json()["detail"]]
    assert any(located[:len(loc)] == loc for located in locs), locs
    assert await _orders_of(customer) == 0


async def test_total_amount_may_be_given_when_it_matches(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 3, price="1.10")
    body = order_body([(sku, 3)], price="1.10")
    body["total_amount"] = 3.30  # a JSON number is accepted too
    placed = await saga.place(body)
    order = await saga.wait_status(placed["order_id"], "COMPLETADA")
    assert order["total_amount"] == "3.30"


async def test_same_key_same_body_returns_the_same_order(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    body, key = order_body([(sku, 1)]), f"idem-{uuid.uuid4()}"
    first = await saga.place(body, key)
    again = await saga.place(body, key)
    assert again["order_id"] == first["order_id"] and again["saga_id"] == first["saga_id"]
    await saga.wait_status(first["order_id"], "COMPLETADA")
    assert await saga.stock(sku) == 4, "one saga only"


async def test_same_key_other_body_is_refused(saga: Saga) -> None:
    sku = new_sku()
    key = f"idem-{uuid.uuid4()}"
    # The same customer: another customer's key is its own (tests/e2e/test_identity.py).
    customer = f"cust-{uuid.uuid4().hex[:8]}"
    await saga.place(order_body([(sku, 1)], customer=customer), key)
    r = await saga.http.post(f"{config.PEDIDOS}/orders",
                             json=order_body([(sku, 2)], customer=customer),
                             headers={"Idempotency-Key": key})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]


async def test_twenty_concurrent_retries_create_one_order(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 50)
    customer = f"cust-{uuid.uuid4().hex[:8]}"
    body, key = order_body([(sku, 2)], customer=customer), f"idem-{uuid.uuid4()}"
    results = await asyncio.gather(*(saga.place(body, key) for _ in range(20)))
    assert len({r["order_id"] for r in results}) == 1
    assert await _orders_of(customer) == 1
    await saga.wait_status(results[0]["order_id"], "COMPLETADA")
    assert await saga.stock(sku) == 48


async def test_an_order_while_the_database_is_down_is_refused_with_503(saga: Saga) -> None:
    from saga_harness import stack

    customer = f"down-{uuid.uuid4().hex[:8]}"
    stack.stack("kill", "postgres")
    try:
        r = await saga.http.post(f"{config.PEDIDOS}/orders",
                                 json=order_body([("SKU-X", 1)], customer=customer))
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"] == "1" and "nothing was done" in r.json()["detail"]
    finally:
        stack.start("postgres")
    assert await _orders_of(customer) == 0
    sku = new_sku()
    await saga.set_stock(sku, 1)
    placed = await saga.place(order_body([(sku, 1)]))
    await saga.wait_status(placed["order_id"], "COMPLETADA", timeout=30)


async def test_the_saga_id_is_random_and_the_keys_a_service_makes_are_time_ordered(
        saga: Saga) -> None:
    """The standard asks for a version-4 saga id (docs/standard.md#saga-and-span-ids); the order's
    and the payment's ids are only keys of their tables' indexes, and time-ordered keys keep each
    insert on the last pages of those indexes (``sagakit.ids``)."""
    placed = await saga.settled_order(5, "COMPLETADA")
    assert uuid.UUID(placed["saga_id"]).version == 4
    assert uuid.UUID(placed["order_id"]).version == 7
    payment_ids = [r["payment_id"] for r in await db.fetch(
        "SELECT payment_id FROM pagos.payments WHERE saga_id = $1", placed["saga_id"])]
    assert len(payment_ids) == 1 and payment_ids[0].version == 7
