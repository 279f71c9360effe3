"""The domain's lines and shortages as inventario's events carry them."""

from __future__ import annotations

from collections.abc import Iterable

from inventario.domain.stock import Line, Shortage
from saga_contracts.events.inventory import Shortage as ShortagePart
from saga_contracts.events.inventory import StockLine


def stock_lines(lines: Iterable[Line]) -> tuple[StockLine, ...]:
    return tuple(StockLine(sku=line.sku, quantity=line.quantity) for line in lines)


def shortage_parts(missing: Iterable[Shortage]) -> tuple[ShortagePart, ...]:
    return tuple(ShortagePart(sku=s.sku, requested=s.requested, available=s.available)
                 for s in missing)
