"""POST /orders' body: no price or total with more decimals than the order's currency has
(ISO 4217), each refused with its own field."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from pedidos.entrypoints.schemas import OrderRequest


def _body(currency: str, *prices: str, total: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "customer_id": "c-1", "currency": currency,
        "items": [{"sku": f"SKU-{n}", "quantity": 1, "price": p} for n, p in enumerate(prices)],
        "shipping_address": {"street": "s", "city": "c", "country": "CL", "postal_code": "1"},
        "payment_method": {"type": "credit_card", "token": "tok_visa"}}
    if total is not None:
        body["total_amount"] = total
    return body


@pytest.mark.parametrize(("currency", "prices", "total"), [
    ("CLP", ("1000", "1000.00"), "2000"),
    ("USD", ("10.50", "0.01"), "10.51"),
    ("EUR", ("12.5",), None),
])
def test_amounts_that_fit_the_currency_are_taken(currency: str, prices: tuple[str, ...],
                                                 total: str | None) -> None:
    order = OrderRequest.model_validate(_body(currency, *prices, total=total))
    assert order.computed_total == sum(Decimal(p) for p in prices)


def test_a_clp_amount_with_decimals_is_refused_at_its_field() -> None:
    with pytest.raises(ValidationError) as refused:
        OrderRequest.model_validate(_body("CLP", "1000", "999.50", total="1999.50"))
    assert [(e["loc"], e["type"]) for e in refused.value.errors()] == [
        (("items", 1, "price"), "currency_decimal_places"),
        (("total_amount",), "currency_decimal_places")]


def test_a_usd_amount_with_three_decimals_is_refused_at_its_field() -> None:
    with pytest.raises(ValidationError) as refused:
        OrderRequest.model_validate(_body("USD", "1.234"))
    assert [e["loc"] for e in refused.value.errors()] == [("items", 0, "price")]


def test_a_product_on_two_lines_is_refused_at_the_items() -> None:
    body = _body("USD", "1.00")
    body["items"] = [{"sku": "SKU-A", "quantity": 600, "price": "1.00"},
                     {"sku": "SKU-A", "quantity": 600, "price": "1.00"}]
    with pytest.raises(ValidationError) as refused:
        OrderRequest.model_validate(body)
    assert [(e["loc"], e["type"]) for e in refused.value.errors()] == [(("items",), "value_error")]
    assert "SKU-A" in refused.value.errors()[0]["msg"]
