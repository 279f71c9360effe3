"""Inputs the services cannot store or carry are refused at the API with a 4xx naming the field,
never a 500, and leave nothing behind: NaN and Infinity, totals beyond what the orders table
holds, NUL characters (PostgreSQL's text and jsonb hold every character but U+0000), lone
surrogates (not UTF-8), a negative zero (not a money string), ids that are not UUIDs.

It counts rows of pedidos' orders table directly: a refused request must leave no order behind,
and the API lists no orders by customer."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest

from saga_harness import config, db
from saga_harness.clients import Saga, new_sku, order_body

JSON = {"content-type": "application/json"}


async def _orders_of(customer: str) -> int:
    return int(await db.fetchval("SELECT count(*) FROM pedidos.orders WHERE customer_id = $1",
                                 customer))


def _refused_at(response: Any, loc: list[Any]) -> None:
    assert response.status_code == 422, response.text
    locs = [e["loc"] for e in response.json()["detail"]]
    assert any(located[:len(loc)] == loc for located in locs), locs


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
async def test_a_non_finite_price_is_refused_with_its_field(saga: Saga, number: str) -> None:
    customer = f"nan-{uuid.uuid4().hex[:8]}"
    # Python's JSON parser reads these bare tokens (and an overflowing 1e999 as Infinity).
    raw = json.dumps(order_body([("SKU-X", 1)], customer=customer)).replace('"5.00"', number)
    r = await saga.http.post(f"{config.PEDIDOS}/orders", content=raw, headers=JSON)
    _refused_at(r, ["body", "items", 0, "price"])
    assert await _orders_of(customer) == 0


@pytest.mark.parametrize("items", [
    [("9999999999.99", 1000)],
    [("9999999999.99", 1), ("0.01", 1)],
], ids=["one-line", "just-over"])
async def test_a_total_beyond_what_an_order_holds_is_refused(
        saga: Saga, items: list[tuple[str, int]]) -> None:
    customer = f"big-{uuid.uuid4().hex[:8]}"
    body = order_body([("SKU-X", 1)], customer=customer)
    body["items"] = [{"sku": f"SKU-{n}", "quantity": qty, "price": price}
                     for n, (price, qty) in enumerate(items)]
    r = await saga.http.post(f"{config.PEDIDOS}/orders", json=body)
    _refused_at(r, ["body", "items"])
    assert await _orders_of(customer) == 0


STORED_STRINGS = [["customer_id"], ["shipping_address", "street"],
                  ["shipping_address", "city"], ["shipping_address", "country"],
                  ["shipping_address", "postal_code"], ["payment_method", "token"]]


def _with(body: dict[str, Any], path: list[str], value: str) -> dict[str, Any]:
    body = copy.deepcopy(body)
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


@pytest.mark.parametrize("path", STORED_STRINGS, ids=".".join)
async def test_a_nul_character_in_a_stored_string_is_refused(saga: Saga,
                                                             path: list[str]) -> None:
    customer = f"nul-{uuid.uuid4().hex[:8]}"
    body = _with(order_body([("SKU-X", 1)], customer=customer), path, "a\x00b")
    r = await saga.http.post(f"{config.PEDIDOS}/orders", json=body)
    _refused_at(r, ["body", *path])
    assert await _orders_of(customer) == 0


@pytest.mark.parametrize("path", [["customer_id"], ["shipping_address", "city"],
                                  ["currency"]], ids=".".join)
async def test_a_lone_surrogate_is_refused_with_its_field(saga: Saga, path: list[str]) -> None:
    body = _with(order_body([("SKU-X", 1)]), path, "x")
    # Only the raw JSON can hold it: "\\ud800" is valid JSON, not valid UTF-8.
    raw = json.dumps(body).replace('"x"', '"x\\ud800"', 1)
    r = await saga.http.post(f"{config.PEDIDOS}/orders", content=raw, headers=JSON)
    _refused_at(r, ["body", *path])


async def test_an_idempotency_key_must_hold_a_character(saga: Saga) -> None:
    customer = f"key-{uuid.uuid4().hex[:8]}"
    r = await saga.http.post(f"{config.PEDIDOS}/orders",
                             json=order_body([("SKU-X", 1)], customer=customer),
                             headers={"Idempotency-Key": ""})
    _refused_at(r, ["header", "idempotency-key"])
    assert await _orders_of(customer) == 0


async def test_a_negative_zero_price_is_a_zero_price(saga: Saga) -> None:
    sku = new_sku()
    body = order_body([(sku, 2)], price="-0.00")
    placed = await saga.place(body)
    order = await saga.order(placed["order_id"])
    assert order["total_amount"] == "0.00"
    assert order["items"] == [{"sku": sku, "quantity": 2, "price": "0.00"}]


@pytest.mark.parametrize("number", ["NaN", "Infinity"])
async def test_a_non_finite_stock_quantity_is_refused(saga: Saga, number: str) -> None:
    sku = new_sku()
    r = await saga.http.put(f"{config.INVENTARIO}/products/{sku}",
                            content=f'{{"quantity": {number}}}', headers=JSON)
    _refused_at(r, ["body", "quantity"])
    assert (await saga.http.get(f"{config.INVENTARIO}/products/{sku}")).status_code == 404


@pytest.mark.parametrize("saga_id", ["a\x00b", "not-a-saga-id", "\x00"])
async def test_payments_are_looked_up_by_a_saga_id_that_is_a_uuid(saga: Saga,
                                                                  saga_id: str) -> None:
    r = await saga.http.get(f"{config.PAGOS}/payments", params={"saga_id": saga_id})
    _refused_at(r, ["query", "saga_id"])


async def test_payments_of_a_saga_are_found_by_its_id_in_any_case(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 1)
    placed = await saga.place(order_body([(sku, 1)]))
    await saga.wait_status(placed["order_id"], "COMPLETADA")
    lower = await saga.payments(placed["saga_id"])
    assert len(lower) == 1
    assert await saga.payments(placed["saga_id"].upper()) == lower


def _json_of(size: int) -> bytes:
    line = b'{"sku":"A","quantity":1,"price":"1.00"},'
    return b'{"items":[' + line * (size // len(line)) + b'{}]}'


@pytest.mark.parametrize(("method", "url"), [
    ("POST", f"{config.PEDIDOS}/orders"),
    ("PUT", f"{config.INVENTARIO}/products/SKU-BIG"),
    ("POST", f"{config.PEDIDOS}/sagas/00000000-0000-0000-0000-000000000000/cancel"),
])
async def test_a_70_kib_body_is_refused_with_413_with_or_without_a_token(
        saga: Saga, method: str, url: str) -> None:
    body = _json_of(70 * 1024)
    with_token = await saga.http.request(method, url, content=body, headers=JSON)
    assert with_token.status_code == 413, with_token.text
    without = await saga.http.request(method, url, content=body,
                                      headers={**JSON, "Authorization": "Bearer x"})
    assert without.status_code == 413, without.text
