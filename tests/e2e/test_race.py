"""Many concurrent orders for few units: no oversell, every order terminal, money balances."""

from __future__ import annotations

from saga_harness.clients import Saga
from saga_harness.scenarios import forty_orders_for_ten_units


async def test_forty_orders_for_ten_units(saga: Saga) -> None:
    await forty_orders_for_ten_units(saga)
