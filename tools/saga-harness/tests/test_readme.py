"""The README's "Try it" parses into the requests the compose stack's test sends: an operator's
and a customer's token, a product's stock and catalog price, and an order at that price."""

from __future__ import annotations

from decimal import Decimal

from saga_harness.readme import try_it_bodies


def test_the_readme_try_it_is_the_requests_the_compose_test_sends() -> None:
    ops, customer, product, order = try_it_bodies()
    assert ops["roles"] == ["operator"] and customer["roles"] == ["customer"]
    assert product["quantity"] > 0 and product["currency"] == order["currency"]
    [item] = order["items"]
    assert item["sku"] == "SKU-123" and Decimal(item["price"]) == Decimal(product["price"])
    assert order["payment_method"]["token"] == "tok_visa"
