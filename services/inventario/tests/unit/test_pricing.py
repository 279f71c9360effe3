"""The catalog price rules: every item at exactly its product's price and currency, or refused;
a verified order costs its lines at catalog prices."""

from __future__ import annotations

from decimal import Decimal

from inventario.domain.payment_match import Money
from inventario.domain.pricing import (
    OrderedItem,
    PriceProblem,
    RefusedItem,
    amount_to_charge,
    refused_items,
)
from inventario.domain.stock import Line

CATALOG = {"A": Money(Decimal("50.00"), "USD"), "B": Money(Decimal("1000"), "CLP")}


def test_items_at_the_catalog_price_are_not_refused_and_prices_compare_as_numbers() -> None:
    assert refused_items([OrderedItem("A", 2, Decimal("50")),
                          OrderedItem("A", 1, Decimal("50.00"))], "USD", CATALOG) == []


def test_every_item_is_held_to_its_price_even_two_of_one_sku() -> None:
    items = [OrderedItem("A", 1, Decimal("50.00")), OrderedItem("A", 1, Decimal("0.01")),
             OrderedItem("B", 1, Decimal("1000")), OrderedItem("Z", 1, Decimal("1.00"))]
    assert refused_items(items, "USD", CATALOG) == [
        RefusedItem("A", PriceProblem.OTHER_PRICE, Decimal("0.01"), CATALOG["A"]),
        RefusedItem("B", PriceProblem.OTHER_CURRENCY, Decimal("1000"), CATALOG["B"]),
        RefusedItem("Z", PriceProblem.NOT_PRICED, Decimal("1.00"), None)]


def test_a_price_above_the_catalogs_is_refused_too() -> None:
    """The customer is never charged more than the catalog asks, nor an amount the order did
    not show: a higher price is no more the catalog's than a lower one."""
    [refused] = refused_items([OrderedItem("A", 1, Decimal("60.00"))], "USD", CATALOG)
    assert refused.problem is PriceProblem.OTHER_PRICE


def test_the_amount_to_charge_is_the_lines_at_catalog_prices() -> None:
    assert amount_to_charge([Line("A", 3)], CATALOG) == Decimal("150.00")
    assert amount_to_charge([Line("B", 2)], CATALOG) == Decimal("2000.00")
