"""reserve_then_pay on the whole stack: a burst of orders for few units ends with no refund for a
lost race (the units were held before the charge) and nothing oversold; the same burst under
Check-Then-Pay still balances, and under ``auto`` loses no race either; a product shows its
reserved units while a payment is pending (its quantity cannot be set below them: 409), and
the saga's history says which strategy ran; inventario killed (SIGKILL) between the
reservation and the payment confirms the reservation after its restart; a reservation shorter
than the payment step cuts the step short, so the saga times out (nothing charged is kept)
instead of paying in time and losing its units."""

from __future__ import annotations

import asyncio
import random
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from saga_harness import db, fault_plugin, stack
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import paused, reconfigured
from saga_harness.waiting import wait_for

PRICE = "3.25"


async def _product(saga: Saga, sku: str, units: int, strategy: str) -> dict[str, Any]:
    r = await saga.http.put(f"{saga.at.inventario}/products/{sku}", json={
        "quantity": units, "price": PRICE, "currency": "USD", "allocation_strategy": strategy})
    assert r.status_code == 200, r.text
    product: dict[str, Any] = r.json()
    return product


async def _read(saga: Saga, sku: str) -> dict[str, Any]:
    r = await saga.http.get(f"{saga.at.inventario}/products/{sku}")
    r.raise_for_status()
    product: dict[str, Any] = r.json()
    return product


async def _burst(saga: Saga, strategy: str) -> tuple[list[dict[str, Any]], list[int], str]:
    """Forty orders of 1 to 3 units sent at once for a product with 10 units; their terminal
    states, their quantities, the SKU."""
    sku = new_sku("SKU-BURST")
    await _product(saga, sku, 10, strategy)
    rng = random.Random(47)
    quantities = [rng.randint(1, 3) for _ in range(40)]
    placed = await asyncio.gather(*(saga.place(order_body([(sku, q)], price=PRICE))
                                    for q in quantities))
    orders = await asyncio.gather(*(saga.wait_terminal(p["order_id"], timeout=90)
                                    for p in placed))
    return list(orders), quantities, sku


async def _balances(saga: Saga, orders: list[dict[str, Any]], quantities: list[int],
                    sku: str) -> None:
    """Nothing oversold, the units of the completed orders are the stock consumed, every
    order's net charge is its amount if it completed and nothing otherwise."""
    completed = sum(q for o, q in zip(orders, quantities, strict=True)
                    if o["status"] == "COMPLETADA")
    product = await wait_for(lambda: _read(saga, sku), lambda p: p["reserved"] == 0,
                             timeout=30, what="no unit left reserved")
    assert product["quantity"] >= 0
    assert completed == 10 - product["quantity"]
    assert product["available"] == product["quantity"]
    for order, qty in zip(orders, quantities, strict=True):
        await saga.wait_payment_settled(order["saga_id"], timeout=30)
        net, charges, _ = await saga.money_of(order["saga_id"])
        assert charges <= 1
        expected = Decimal(PRICE) * qty if order["status"] == "COMPLETADA" else Decimal(0)
        assert net == expected, (order["status"], net, expected)


async def test_a_burst_under_reserve_then_pay_refunds_no_lost_race(saga: Saga) -> None:
    orders, quantities, sku = await _burst(saga, "reserve_then_pay")

    statuses = [o["status"] for o in orders]
    # Only a declined or timed-out payment may be refunded; these cards are all approved.
    assert set(statuses) <= {"COMPLETADA", "CANCELADA_SIN_STOCK"}, statuses
    assert statuses.count("COMPLETADA") >= 4  # 10 units, at most 3 per order
    await _balances(saga, orders, quantities, sku)
    assert await _allocations_failed(sku) == 0, "a payment lost the race for its units"
    assert await db.fetchval(
        "SELECT count(*) FROM inventario.reservations WHERE sku = $1 AND status = 'CONFIRMED'",
        sku) == statuses.count("COMPLETADA")


async def test_a_burst_under_auto_refunds_no_lost_race_either(saga: Saga) -> None:
    """``auto`` decides under the product's lock at each validation's commit: the burst's first
    orders check without reserving, the rest reserve beside them, and no payment loses its
    race (docs/allocation-strategies.md, "The bound")."""
    orders, quantities, sku = await _burst(saga, "auto")

    statuses = [o["status"] for o in orders]
    assert set(statuses) <= {"COMPLETADA", "CANCELADA_SIN_STOCK"}, statuses
    await _balances(saga, orders, quantities, sku)
    assert await _allocations_failed(sku) == 0, "a payment lost the race for its units"
    ran = await db.fetch(
        "SELECT answer->'payload'->>'allocation_strategy' AS ran FROM inventario.stock_checks "
        "WHERE items @> jsonb_build_array(jsonb_build_object('sku', $1::text)) "
        "AND result = 'verified'", sku)
    assert {r["ran"] for r in ran} == {"check_then_pay", "reserve_then_pay"}, ran


async def _allocations_failed(sku: str) -> int:
    failed: int = await db.fetchval(
        "SELECT count(*) FROM inventario.allocations a JOIN inventario.stock_checks c "
        "USING (saga_id) WHERE c.items @> jsonb_build_array(jsonb_build_object('sku', $1::text)) "
        "AND a.status = 'FAILED'", sku)
    return failed


async def test_the_same_burst_under_check_then_pay_still_balances(saga: Saga) -> None:
    orders, quantities, sku = await _burst(saga, "check_then_pay")

    assert {o["status"] for o in orders} <= {"COMPLETADA", "CANCELADA_CON_REEMBOLSO",
                                             "CANCELADA_SIN_STOCK"}
    await _balances(saga, orders, quantities, sku)
    assert await db.fetchval("SELECT count(*) FROM inventario.reservations WHERE sku = $1",
                             sku) == 0


async def test_a_pending_payment_shows_its_units_reserved_and_the_history_its_strategy(
        saga: Saga) -> None:
    sku = new_sku()
    created = await _product(saga, sku, 5, "reserve_then_pay")
    assert (created["reserved"], created["available"],
            created["allocation_strategy"]) == (0, 5, "reserve_then_pay")
    await saga.wait_caught_up("pagos")
    with paused("pagos"):
        placed = await saga.place(order_body([(sku, 2)], price=PRICE))
        held = await wait_for(lambda: _read(saga, sku), lambda p: p["reserved"] == 2,
                              timeout=15, what="two units reserved")
        assert (held["quantity"], held["available"]) == (5, 3)
        r = await saga.http.put(f"{saga.at.inventario}/products/{sku}", json={"quantity": 1})
        assert r.status_code == 409, r.text
        [refused] = r.json()["detail"]
        assert (refused["loc"][-1], refused["ctx"]["reserved"]) == ("quantity", 2), refused
        assert (await _read(saga, sku))["quantity"] == 5
    order = await saga.wait_terminal(placed["order_id"], timeout=30)
    assert order["status"] == "COMPLETADA"
    after = await _read(saga, sku)
    assert (after["quantity"], after["reserved"], after["available"]) == (3, 0, 3)
    [verified] = [e for e in await saga.history(placed["saga_id"])
                  if e["event_type"] == "StockVerificado"]
    assert verified["detail"]["allocation_strategy"] == "reserve_then_pay", verified
    assert verified["detail"]["reserved_until"].endswith("Z")


async def test_a_strategy_left_out_is_kept_and_an_unknown_one_refused(saga: Saga) -> None:
    sku = new_sku()
    await _product(saga, sku, 5, "auto")
    r = await saga.http.put(f"{saga.at.inventario}/products/{sku}", json={"quantity": 4})
    assert r.status_code == 200 and r.json()["allocation_strategy"] == "auto"
    r = await saga.http.put(f"{saga.at.inventario}/products/{sku}",
                            json={"quantity": 4, "allocation_strategy": "reserve"})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"][-1] == "allocation_strategy"


async def _wait_dead(part: str) -> None:
    async def probe() -> bool:
        return stack.alive(part)
    await wait_for(probe, lambda up: not up, timeout=15, what=f"{part} killed itself")


# pedidos' validation deadline for the SIGKILL test: a restarted inventario rejoins its consumer
# group only once the killed member's session has timed out (tens of seconds on a loaded
# machine), past the 30 s default; the saga must still be waiting then, for the restarted
# instance to confirm the reservation it made before it died.
PATIENT_VALIDATION = {"PEDIDOS_VALIDATION_TIMEOUT_S": "300"}


async def test_inventario_killed_between_the_reservation_and_the_payment_confirms_it_restarted(
        saga: Saga) -> None:
    """SIGKILL right after the validation's commit (the reservation and its StockVerificado,
    perhaps not yet published). Restarted, inventario goes on: the redelivered OrdenSolicitada is
    absorbed, the StockVerificado goes out, the payment succeeds and the restarted instance
    confirms the reservation made before the crash, once: one unit left, none held. pedidos
    waits for the validation long enough (``PATIENT_VALIDATION``) for that to happen whatever
    the restart takes."""
    sku = new_sku()
    await _product(saga, sku, 4, "reserve_then_pay")
    await asyncio.to_thread(stack.restart, "pedidos", PATIENT_VALIDATION)
    try:
        await saga.wait_caught_up("inventario")
        stack.restart("inventario", fault_plugin.env(crash_after_commit="OrdenSolicitada"))
        try:
            placed = await saga.place(order_body([(sku, 3)], price=PRICE))
            await _wait_dead("inventario")
            assert await db.fetchval(
                "SELECT status FROM inventario.reservations WHERE saga_id = $1",
                placed["saga_id"]) == "RESERVED"
        finally:
            stack.restart("inventario")
        order = await saga.wait_terminal(placed["order_id"], timeout=240)
    finally:
        await asyncio.to_thread(stack.restart, "pedidos")
    assert order["status"] == "COMPLETADA", order
    assert [r["status"] for r in await db.fetch(
        "SELECT status FROM inventario.reservations WHERE saga_id = $1",
        placed["saga_id"])] == ["CONFIRMED"]
    product = await _read(saga, sku)
    assert (product["quantity"], product["reserved"]) == (1, 0), product
    assert await db.fetchval("SELECT count(*) FROM inventario.processed_messages "
                             "WHERE saga_id = $1 AND event_type = 'OrdenSolicitada'",
                             placed["saga_id"]) == 1
    assert await db.fetchval("SELECT count(*) FROM inventario.allocations "
                             "WHERE saga_id = $1 AND status = 'ALLOCATED'",
                             placed["saga_id"]) == 1


async def test_a_reservation_is_counted(saga: Saga) -> None:
    async def reserved_total() -> float:
        text = (await saga.http.get(f"{saga.at.inventario}/metrics")).text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith('saga_reservations_total{') and 'outcome="reserved"'
                   in line)
    before = await reserved_total()
    sku = new_sku()
    await _product(saga, sku, 5, "reserve_then_pay")
    placed = await saga.place(order_body([(sku, 1)], price=PRICE))
    assert (await saga.wait_terminal(placed["order_id"], timeout=30))["status"] == "COMPLETADA"
    await wait_for(reserved_total, lambda n: n >= before + 1, timeout=10,
                   what="the reservation counted")


async def test_a_reservation_shorter_than_the_payment_step_cuts_the_step_short(
        saga: Saga) -> None:
    """inventario holds the units 3 s, pedidos' payment step is 60 s, pagos is late: the step
    falls due 30 s before the reservation ends (already past), so the saga times out and its
    cancellation releases the units; a payment made within a 60 s step would have found
    them taken by the next order and been refunded."""
    sku = new_sku("SKU-SHORT-HOLD")
    with reconfigured("inventario", {"INVENTARIO_RESERVATION_TTL_S": "3"}):
        await _product(saga, sku, 2, "reserve_then_pay")
        await saga.wait_caught_up("pagos")
        with paused("pagos"):
            first = await saga.place(order_body([(sku, 2)], price=PRICE))
            timed_out = await saga.wait_terminal(first["order_id"], timeout=30)
            second = await saga.place(order_body([(sku, 2)], price=PRICE))
            await wait_for(lambda: _read(saga, sku), lambda p: p["reserved"] == 2, timeout=20,
                           what="2 units reserved by the second order")
        completed = await saga.wait_terminal(second["order_id"], timeout=60)
    assert timed_out["status"] == "CANCELADA_TIMEOUT", timed_out
    assert completed["status"] == "COMPLETADA", completed
    history = await saga.history(first["saga_id"])
    [verified] = [e["detail"] for e in history if e["event_type"] == "StockVerificado"]
    until = datetime.fromisoformat(verified["reserved_until"])
    assert datetime.fromisoformat(verified["step_deadline_at"]) == until - timedelta(seconds=30)
    assert "FalloAsignacion" not in {e["event_type"] for e in history}
