"""Server-side prices and currency exponents, end to end: an order is charged its products'
catalog prices or nothing (CANCELADA_PRECIO_RECHAZADO), amounts reach the gateway in the
minor units of their currency's ISO 4217 exponent, an amount with more decimals than its
currency has is a 422, and the gateway answers nobody without its secret key.

What was charged is read from the gateway's own ledger, not from what pagos believes."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from saga_harness import config
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.waiting import wait_for


async def _charges_of(saga: Saga, saga_id: str) -> list[dict[str, Any]]:
    return [c for c in (await saga.ledger())["charges"]
            if c["idempotency_key"] == f"charge-{saga_id}"]


async def _refused_without_a_charge(saga: Saga, placed: dict[str, Any]) -> dict[str, Any]:
    order = await saga.wait_terminal(placed["order_id"], timeout=15)
    assert (order["status"], order["cancel_reason"]) == ("CANCELADA_PRECIO_RECHAZADO",
                                                         "precio_rechazado")
    assert order["charge_id"] is None
    # pagos recorded the cancellation, so that no later event could make it charge.
    await wait_for(lambda: saga.payments(placed["saga_id"]),
                   lambda ps: [p["status"] for p in ps] == ["CANCELLED"], timeout=10,
                   what="pagos marks the saga cancelled")
    assert await _charges_of(saga, placed["saga_id"]) == []
    return order


async def test_a_client_price_of_0_01_for_a_50_00_item_is_never_charged(saga: Saga) -> None:
    sku = new_sku("SKU-PRICED")
    await saga.set_stock(sku, 5, price="50.00")
    placed = await saga.place(order_body([(sku, 1)], price="0.01"))

    await _refused_without_a_charge(saga, placed)
    assert await saga.stock(sku) == 5
    steps = [(e["event_type"], e["to_status"]) for e in await saga.history(placed["saga_id"])]
    # inventario publishes the refusal in both versions, PrecioRechazado_v2 first; pedidos
    # handles the saga's once, and the other is its twin, a duplicate.
    assert [s for s in steps if s[0].startswith("PrecioRechazado")] == [
        ("PrecioRechazado_v2", "CANCELADA_PRECIO_RECHAZADO")]
    # Nothing anywhere in the gateway was charged 0.01 for it, under any key.
    ledger = await saga.ledger()
    assert not [c for c in ledger["charges"] if placed["saga_id"] in c["idempotency_key"]]


async def test_an_order_at_the_catalog_price_is_charged_the_catalog_amount(saga: Saga) -> None:
    sku = new_sku("SKU-PRICED")
    await saga.set_stock(sku, 5, price="50.00")
    placed = await saga.place(order_body([(sku, 2)], price="50.00"))

    order = await saga.wait_status(placed["order_id"], "COMPLETADA", timeout=15)
    assert order["total_amount"] == "100.00"
    [charge] = await _charges_of(saga, placed["saga_id"])
    assert (charge["amount"], charge["currency"], charge["status"]) == (10000, "usd",
                                                                        "succeeded")


@pytest.mark.parametrize(("catalog", "ordered"), [
    (("5.00", "USD"), ("5.00", "EUR")),   # the product is priced in another currency
    ((None, "USD"), ("5.00", "USD")),     # the product has no price: it is not for sale
    (("5.00", "USD"), ("6.00", "USD")),   # above the catalog's price: not charged either
])
async def test_an_item_off_the_catalog_cancels_the_order_without_a_charge(
        saga: Saga, catalog: tuple[str | None, str], ordered: tuple[str, str]) -> None:
    sku = new_sku("SKU-PRICED")
    await saga.set_stock(sku, 5, price=catalog[0], currency=catalog[1])
    body = order_body([(sku, 1)], price=ordered[0])
    body["currency"] = ordered[1]
    placed = await saga.place(body)
    await _refused_without_a_charge(saga, placed)


async def test_a_clp_order_of_1000_is_charged_1000_minor_units(saga: Saga) -> None:
    """CLP has no decimals (ISO 4217): 1000 CLP is 1000 at the gateway, not 100000."""
    sku = new_sku("SKU-CLP")
    await saga.set_stock(sku, 3, price="1000", currency="CLP")
    body = order_body([(sku, 1)], price="1000")
    body["currency"] = "CLP"
    placed = await saga.place(body)

    await saga.wait_status(placed["order_id"], "COMPLETADA", timeout=15)
    [charge] = await _charges_of(saga, placed["saga_id"])
    assert (charge["amount"], charge["currency"]) == (1000, "clp")
    assert (await saga.money_of(placed["saga_id"]))[0] == Decimal("1000")
    [payment] = await saga.payments(placed["saga_id"])
    assert Decimal(payment["amount"]) == Decimal("1000")


@pytest.mark.parametrize(("currency", "price", "error"), [
    ("USD", "1.005", "decimal_max_places"),
    ("CLP", "1000.5", "currency_decimal_places"),
])
async def test_an_order_amount_with_more_decimals_than_its_currency_is_a_422(
        saga: Saga, currency: str, price: str, error: str) -> None:
    body = order_body([(new_sku(), 1)], price=price)
    body["currency"] = currency
    r = await saga.http.post(f"{config.PEDIDOS}/orders", json=body)
    assert r.status_code == 422, r.text
    assert {(tuple(e["loc"]), e["type"]) for e in r.json()["detail"]} == {
        (("body", "items", 0, "price"), error)}


@pytest.mark.parametrize(("body", "loc"), [
    ({"quantity": 1, "price": "1000.5", "currency": "CLP"}, ["body", "price"]),
    ({"quantity": 1, "price": "1.234", "currency": "USD"}, ["body", "price"]),
    ({"quantity": 1, "price": "0.00", "currency": "USD"}, ["body", "price"]),
    ({"quantity": 1, "price": "5.00"}, ["body", "currency"]),
    ({"quantity": 1, "price": "5.00", "currency": "JPY"}, ["body", "currency"]),
])
async def test_a_catalog_price_that_does_not_fit_is_a_422_and_sets_nothing(
        saga: Saga, body: dict[str, Any], loc: list[Any]) -> None:
    sku = new_sku()
    r = await saga.http.put(f"{config.INVENTARIO}/products/{sku}", json=body)
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["detail"]] == [loc]
    assert (await saga.http.get(f"{config.INVENTARIO}/products/{sku}")).status_code == 404


async def test_a_product_shows_its_catalog_price_and_keeps_it_when_restocked(
        saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 2, price="12.5", currency="EUR")
    await saga.set_stock(sku, 7, price=None)
    product = (await saga.http.get(f"{config.INVENTARIO}/products/{sku}")).json()
    assert (product["quantity"], product["price"], product["currency"]) == (7, "12.50", "EUR")


@pytest.mark.parametrize("authorization", [None, "Bearer sk_test_wrong", "Basic x"])
async def test_the_gateway_answers_nobody_without_its_secret_key(
        saga: Saga, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    ledger = await saga.http.get(f"{config.GATEWAY}/ledger", headers=headers)
    charge = await saga.http.post(f"{config.GATEWAY}/v1/charges", headers={
        **headers, "Idempotency-Key": f"charge-{new_sku()}"},
        json={"amount": 1, "currency": "usd", "source": "tok_visa"})
    for answer in (ledger, charge):
        assert answer.status_code == 401, answer.text
    assert (await saga.http.get(f"{config.GATEWAY}/ledger",
                                headers=config.gateway_auth())).status_code == 200
