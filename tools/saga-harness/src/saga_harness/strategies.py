"""Stocking a product under an allocation strategy (``PUT /products/{sku}``'s optional
``allocation_strategy``), for the tools that drive the stack: the benchmark's bursts and the
chaos suite's load.

A stack whose inventario refuses the field has no strategies: every product there is
Check-Then-Pay, so that one is stocked without it; asking such a stack for another strategy
fails, saying so, rather than measuring or checking Check-Then-Pay under another name."""

from __future__ import annotations

from typing import Any

import httpx

from saga_harness import config

STRATEGIES = ("check_then_pay", "reserve_then_pay", "auto")
# What a product is when it is stocked without a strategy (and on a stack that has none).
DEFAULT = "check_then_pay"


class StrategyRefused(RuntimeError):
    """inventario does not take the allocation strategy asked for."""


def parse(value: str, variable: str) -> tuple[str, ...]:
    """A comma-separated list of strategies from ``variable``; an unknown name is an error."""
    chosen = tuple(s for s in value.split(",") if s)
    unknown = [s for s in chosen if s not in STRATEGIES]
    if unknown:
        raise SystemExit(f"{variable}: unknown {', '.join(unknown)} (known: "
                         f"{', '.join(STRATEGIES)})")
    return chosen


async def stock(http: httpx.AsyncClient, sku: str, quantity: int, strategy: str, *,
                price: str, currency: str = "USD") -> None:
    """Creates or sets the product with ``quantity`` units at ``price``, under ``strategy``
    (``http`` authenticates as an operator)."""
    body: dict[str, Any] = {"quantity": quantity, "price": price, "currency": currency}
    answer = await http.put(f"{config.INVENTARIO}/products/{sku}",
                            json={**body, "allocation_strategy": strategy})
    if answer.status_code == 422 and "allocation_strategy" in answer.text:
        if strategy != DEFAULT:
            raise StrategyRefused(
                f"inventario refused allocation_strategy={strategy!r} for {sku} (PUT /products: "
                f"{answer.text[:300]}): this stack has no allocation strategies, only "
                f"{DEFAULT}")
        answer = await http.put(f"{config.INVENTARIO}/products/{sku}", json=body)
    answer.raise_for_status()
    shown = answer.json().get("allocation_strategy", DEFAULT)
    if shown != strategy:
        raise StrategyRefused(f"inventario set {sku} to {shown!r}, not {strategy!r}")
