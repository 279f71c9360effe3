"""Catalog prices, free of infrastructure: which order items are not at their product's price,
and what a verified order is charged.

An order is charged its products' catalog prices and nothing else, and only when every item
was ordered at exactly that price, in that currency: an item of a product without a price, in
another currency or at another price, cancels the order before anything is charged
(``PrecioRechazado``). The customer is never charged an amount the order did not show, and
never less than the catalog asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from inventario.domain.payment_match import Money
from inventario.domain.stock import Line


@dataclass(frozen=True)
class OrderedItem:
    """An item as the order gave it: its price is the customer's, in the order's currency."""

    sku: str
    quantity: int
    price: Decimal


class PriceProblem(StrEnum):
    """Why an item is refused: the ``problem`` PrecioRechazado_v2 names (PrecioRechazado names
    it in Spanish: ``inventario.usecases.price_refusal_versions``)."""

    NOT_PRICED = "not_priced"
    OTHER_CURRENCY = "other_currency"
    OTHER_PRICE = "other_price"


@dataclass(frozen=True)
class RefusedItem:
    sku: str
    problem: PriceProblem
    price: Decimal
    catalog: Money | None
    """The product's catalog price (None: it has none)."""


def refused_items(items: Iterable[OrderedItem], currency: str,
                  catalog: Mapping[str, Money]) -> list[RefusedItem]:
    """The items whose price is not their product's catalog price in ``currency`` (the
    order's), in the order's order. Prices compare as numbers (12.5 is 12.50)."""
    refused = []
    for item in items:
        listed = catalog.get(item.sku)
        if listed is None:
            problem: PriceProblem | None = PriceProblem.NOT_PRICED
        elif listed.currency != currency:
            problem = PriceProblem.OTHER_CURRENCY
        elif listed.amount != item.price:
            problem = PriceProblem.OTHER_PRICE
        else:
            problem = None
        if problem is not None:
            refused.append(RefusedItem(item.sku, problem, item.price, listed))
    return refused


def amount_to_charge(lines: Iterable[Line], catalog: Mapping[str, Money]) -> Decimal:
    """What the lines cost at their catalog prices (every line's product has one)."""
    return sum((catalog[line.sku].amount * line.quantity for line in lines),
               Decimal("0.00")).quantize(Decimal("0.01"))
