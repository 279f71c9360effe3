"""The standard's scenarios end to end (docs/standard.md#the-scenarios), through HTTP only.

Only the notifications are read from pedidos' table: they have no interface of their own."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import httpx

from saga_harness import config, db, identity
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.waiting import wait_for


async def test_happy_path_completes_and_allocates(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 50)
    placed = await saga.place(order_body([(sku, 10)]))
    assert placed["status"] == "PENDIENTE_VALIDACION"

    order = await saga.wait_terminal(placed["order_id"], timeout=10)

    assert order["status"] == "COMPLETADA"
    assert await saga.stock(sku) == 40
    payments = await saga.payments(placed["saga_id"])
    assert [p["status"] for p in payments] == ["CAPTURED"]
    assert payments[0]["amount"] == "50.00" and payments[0]["charge_id"] == order["charge_id"]
    net, charges, refunds = await saga.money_of(placed["saga_id"])
    assert (net, charges, refunds) == (Decimal("50.00"), 1, 0)
    steps = [(e["event_type"], e["to_status"]) for e in await saga.history(placed["saga_id"])]
    assert steps == [("OrdenSolicitada", "PENDIENTE_VALIDACION"),
                     ("StockVerificado", "PENDIENTE_PAGO"),
                     ("PagoExitoso", "PENDIENTE_ASIGNACION"),
                     ("StockAsignado", "COMPLETADA")]


async def test_happy_path_is_measured(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    placed = await saga.place(order_body([(sku, 1)]))
    await saga.wait_status(placed["order_id"], "COMPLETADA")
    metrics = (await saga.http.get(f"{config.PEDIDOS}/metrics")).text
    assert 'saga_duration_seconds_count{final_status="success",saga_type="OrderCheckThenPay"}' \
        in metrics


async def test_no_stock_cancels_without_charging(saga: Saga) -> None:
    sku = new_sku("SKU-456")
    await saga.set_stock(sku, 0)
    placed = await saga.place(order_body([(sku, 5)]))

    order = await saga.wait_terminal(placed["order_id"], timeout=10)

    assert order["status"] == "CANCELADA_SIN_STOCK"
    assert order["cancel_reason"] == "stock_insuficiente"
    ledger = await saga.ledger()
    assert not [c for c in ledger["charges"] if placed["saga_id"] in c["idempotency_key"]]
    # pagos recorded the cancellation so that no later event could make it charge.
    await wait_for(lambda: saga.payments(placed["saga_id"]),
                   lambda ps: [p["status"] for p in ps] == ["CANCELLED"], timeout=10,
                   what="pagos marks the saga cancelled")


async def test_unknown_product_is_out_of_stock(saga: Saga) -> None:
    placed = await saga.place(order_body([(new_sku("SKU-NOPE"), 1)]))
    order = await saga.wait_terminal(placed["order_id"])
    assert order["status"] == "CANCELADA_SIN_STOCK"


async def test_declined_payment_leaves_stock_untouched(saga: Saga) -> None:
    sku = new_sku("SKU-TEST2")
    await saga.set_stock(sku, 20)
    placed = await saga.place(order_body([(sku, 5)], token="tok_chargeDeclined"))

    order = await saga.wait_terminal(placed["order_id"])

    assert order["status"] == "CANCELADA_PAGO_RECHAZADO"
    assert await saga.stock(sku) == 20
    payments = await saga.payments(placed["saga_id"])
    assert [(p["status"], p["decline_code"]) for p in payments] == [
        ("DECLINED", "generic_decline")]
    net, charges, _ = await saga.money_of(placed["saga_id"])
    assert (net, charges) == (0, 0)


async def test_insufficient_funds_is_a_decline_with_its_code(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 3)
    placed = await saga.place(order_body([(sku, 1)],
                                         token="tok_chargeDeclinedInsufficientFunds"))
    order = await saga.wait_terminal(placed["order_id"])
    assert order["status"] == "CANCELADA_PAGO_RECHAZADO"
    payments = await saga.payments(placed["saga_id"])
    assert payments[0]["decline_code"] == "insufficient_funds"


async def test_two_orders_one_unit(saga: Saga) -> None:
    """Scenario C: both validate and pay; one allocates, the other is refunded."""
    sku = new_sku("SKU-TEST3")
    await saga.set_stock(sku, 1)
    a, b = await asyncio.gather(saga.place(order_body([(sku, 1)])),
                                saga.place(order_body([(sku, 1)])))

    orders = await asyncio.gather(saga.wait_terminal(a["order_id"], timeout=20),
                                  saga.wait_terminal(b["order_id"], timeout=20))

    statuses = sorted(o["status"] for o in orders)
    assert await saga.stock(sku) == 0
    assert statuses.count("COMPLETADA") == 1
    loser = next(o for o in orders if o["status"] != "COMPLETADA")
    # Usually both pass validation (the race the standard describes) and the loser is refunded;
    # if the winner's allocation committed before the loser's validation, it is out of stock.
    assert loser["status"] in ("CANCELADA_CON_REEMBOLSO", "CANCELADA_SIN_STOCK")
    net, charges, refunds = await saga.money_of(loser["saga_id"])
    assert net == 0
    if loser["status"] == "CANCELADA_CON_REEMBOLSO":
        assert (charges, refunds) == (1, 1)
        assert loser["refund_status"] == "REFUNDED"
        events = [e["event_type"] for e in await saga.history(loser["saga_id"])]
        assert "FalloAsignacion" in events and events[-1] == "ReembolsoEjecutado"


async def test_order_and_saga_are_queryable(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 2, price="12.34")
    placed = await saga.place(order_body([(sku, 2)], price="12.34"))
    await saga.wait_status(placed["order_id"], "COMPLETADA")
    order = await saga.order(placed["order_id"])
    assert order["total_amount"] == "24.68" and order["terminal"] is True
    r = await saga.http.get(f"{config.PEDIDOS}/sagas/{placed['saga_id']}/status")
    status = r.json()
    assert status["status"] == "COMPLETADA" and status["terminal"] is True
    assert status["finished_at"] is not None and status["saga_type"] == "OrderCheckThenPay"
    missing = await saga.http.get(f"{config.PEDIDOS}/orders/00000000-0000-4000-8000-000000000000")
    assert missing.status_code == 404


async def test_location_header_points_at_the_order(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 1)
    r = await saga.http.post(f"{config.PEDIDOS}/orders", json=order_body([(sku, 1)]))
    assert r.status_code == 202
    follow = await saga.http.get(f"{config.PEDIDOS}{r.headers['Location']}")
    assert follow.status_code == 200 and follow.json()["order_id"] == r.json()["order_id"]


async def test_every_service_publishes_its_operational_endpoints(running_stack: None) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        for base in (config.PEDIDOS, config.INVENTARIO, config.PAGOS):
            for path in ("/health", "/ready", "/openapi.json"):
                r = await http.get(base + path)
                assert r.status_code == 200, (base, path, r.text)
            # /metrics is for operators (tests/e2e/test_identity.py has the refusals).
            r = await http.get(f"{base}/metrics", headers=identity.operator_headers())
            assert r.status_code == 200, (base, r.text)


async def test_the_customer_is_told_once_how_the_order_ended(saga: Saga) -> None:
    """The happy path's last step (docs/standard.md#the-scenarios) and its cancellations: one
    notification per terminal state, written in the same statement as the transition."""
    sku = new_sku()
    await saga.set_stock(sku, 1)
    done = await saga.place(order_body([(sku, 1)]))
    refused = await saga.place(order_body([(sku, 5)]))
    for placed, status in ((done, "COMPLETADA"), (refused, "CANCELADA_SIN_STOCK")):
        order = await saga.wait_terminal(placed["order_id"], timeout=10)
        assert order["status"] == status
        rows = await db.fetch("SELECT kind, customer_id FROM pedidos.notifications "
                              "WHERE order_id = $1::uuid", placed["order_id"])
        assert [(r["kind"], r["customer_id"]) for r in rows] == [(status, order["customer_id"])]
