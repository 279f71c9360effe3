"""Scenarios that more than one suite runs against a stack: the local stack's e2e tests and the
compose stack's (tools/compose-stack/tests), each with its own ``Saga``."""

from __future__ import annotations

import asyncio
import random
from decimal import Decimal
from typing import Any

from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import row_locked
from saga_harness.waiting import wait_for


async def forty_orders_for_ten_units(saga: Saga) -> None:
    """Forty concurrent orders of 1 to 3 units for a product with 10: no oversell, every order
    terminal, the units of the completed orders are the stock consumed, and every order's net
    charge is its amount if it completed and nothing otherwise, charged at most once."""
    sku = new_sku("SKU-RACE")
    await saga.set_stock(sku, 10, price="3.25")
    rng = random.Random(7)
    quantities = [rng.randint(1, 3) for _ in range(40)]
    placed = await asyncio.gather(*(saga.place(order_body([(sku, q)], price="3.25"))
                                    for q in quantities))

    orders = await asyncio.gather(*(saga.wait_terminal(p["order_id"], timeout=60)
                                    for p in placed))

    completed = [(o, q) for o, q in zip(orders, quantities, strict=True)
                 if o["status"] == "COMPLETADA"]
    allocated = sum(q for _, q in completed)
    final_stock = await saga.stock(sku)
    assert final_stock >= 0
    assert allocated == 10 - final_stock, "units allocated to completed orders = stock consumed"
    assert {o["status"] for o in orders} <= {"COMPLETADA", "CANCELADA_CON_REEMBOLSO",
                                             "CANCELADA_SIN_STOCK"}
    for order, qty in zip(orders, quantities, strict=True):
        await saga.wait_payment_settled(order["saga_id"])
        net, charges, _ = await saga.money_of(order["saga_id"])
        assert charges <= 1, f"{order['order_id']} charged {charges} times"
        expected = Decimal("3.25") * qty if order["status"] == "COMPLETADA" else Decimal(0)
        assert net == expected, (order["status"], net, expected)


async def refund_left_for_manual_action(saga: Saga) -> dict[str, Any]:
    """A saga whose refund keeps failing, so its payment is left for a manual refund: charged,
    then its allocation finds no stock (the product's row held while the charge is made, its
    stock then taken away), and the gateway refuses the refund (``tok_refundFails``)."""
    sku = new_sku()
    await saga.set_stock(sku, 1)
    async with row_locked("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE",
                          sku) as conn:
        placed = await saga.place(order_body([(sku, 1)], token="tok_refundFails"))
        await wait_for(lambda: saga.payments(placed["saga_id"]),
                       lambda ps: bool(ps) and ps[0]["status"] == "CAPTURED", timeout=10,
                       what="charged")
        await conn.execute("UPDATE inventario.products SET quantity = 0 WHERE sku = $1", sku)
    order = await saga.wait_terminal(placed["order_id"], timeout=30)
    assert order["status"] == "REEMBOLSO_FALLIDO"
    return placed
