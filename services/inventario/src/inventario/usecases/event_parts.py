"""The domain's lines, shortages and refused prices as inventario's events carry them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from inventario.domain.payment_match import Money
from inventario.domain.pricing import RefusedItem
from inventario.domain.stock import Line, Shortage
from saga_contracts.events.inventory import PricedLine, RefusedLine_v2, StockLine
from saga_contracts.events.inventory import Shortage as ShortagePart


def stock_lines(lines: Iterable[Line]) -> tuple[StockLine, ...]:
    return tuple(StockLine(sku=line.sku, quantity=line.quantity) for line in lines)


def priced_lines(lines: Iterable[Line], catalog: Mapping[str, Money]) -> tuple[PricedLine, ...]:
    return tuple(PricedLine(sku=line.sku, quantity=line.quantity,
                            unit_price=catalog[line.sku].amount) for line in lines)


def shortage_parts(missing: Iterable[Shortage]) -> tuple[ShortagePart, ...]:
    return tuple(ShortagePart(sku=s.sku, requested=s.requested, available=s.available)
                 for s in missing)


def refused_parts(refused: Iterable[RefusedItem], currency: str) -> tuple[RefusedLine_v2, ...]:
    parts = []
    for item in refused:
        # A product without a price leaves the catalog's fields out (absent, never null).
        listed: dict[str, Any] = ({} if item.catalog is None else
                                  {"catalog_price": item.catalog.amount,
                                   "catalog_currency": item.catalog.currency})
        parts.append(RefusedLine_v2(sku=item.sku, problem=item.problem.value, price=item.price,
                                 currency=currency, **listed))
    return tuple(parts)


def utc_timestamp(at: datetime) -> str:
    """``at`` as the events write an instant: UTC, RFC 3339, to the microsecond."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
