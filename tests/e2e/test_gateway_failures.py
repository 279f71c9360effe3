"""A gateway that fails for a while, or keeps failing refunds (durable retries in pagos).

To lose the race, a test holds inventario's product row locked and empties it in that
transaction (``row_locked``): nothing in the public interfaces can hold an allocation back."""

from __future__ import annotations

from decimal import Decimal

from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import row_locked
from saga_harness.waiting import wait_for


async def test_transient_failures_then_success_charge_exactly_once(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    placed = await saga.place(order_body([(sku, 1)], token="tok_transient2"))
    order = await saga.wait_terminal(placed["order_id"], timeout=20)
    assert order["status"] == "COMPLETADA"
    net, charges, refunds = await saga.money_of(placed["saga_id"])
    assert (net, charges, refunds) == (Decimal("5.00"), 1, 0)
    payment = (await saga.payments(placed["saga_id"]))[0]
    assert [a["outcome"] for a in payment["attempts"]] == ["unavailable", "unavailable",
                                                           "approved"]


async def _lose_the_race(saga: Saga, token: str) -> dict:
    """Stock is there at validation, gone at allocation: FalloAsignacion, every time."""
    sku = new_sku()
    await saga.set_stock(sku, 1)
    async with row_locked("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE",
                          sku) as conn:
        placed = await saga.place(order_body([(sku, 1)], token=token))
        await wait_for(lambda: saga.payments(placed["saga_id"]),
                       lambda ps: bool(ps) and ps[0]["status"] == "CAPTURED", timeout=10,
                       what="charged")
        await conn.execute("UPDATE inventario.products SET quantity = 0 WHERE sku = $1", sku)
    return placed


async def test_race_lost_is_refunded_and_only_then_cancelled(saga: Saga) -> None:
    placed = await _lose_the_race(saga, "tok_visa")
    order = await saga.wait_terminal(placed["order_id"], timeout=20)
    assert order["status"] == "CANCELADA_CON_REEMBOLSO"
    assert order["refund_status"] == "REFUNDED"
    history = [(e["event_type"], e["to_status"]) for e in await saga.history(placed["saga_id"])]
    assert ("FalloAsignacion", "PENDIENTE_REEMBOLSO") in history
    assert history[-1] == ("ReembolsoEjecutado", "CANCELADA_CON_REEMBOLSO")
    assert await saga.money_of(placed["saga_id"]) == (Decimal(0), 1, 1)


async def test_a_refund_that_keeps_failing_is_flagged_for_manual_refund(saga: Saga) -> None:
    from saga_harness import config

    placed = await _lose_the_race(saga, "tok_refundFails")
    await saga.wait_status(placed["order_id"], "PENDIENTE_REEMBOLSO")
    # The compensation is already running: a cancel has nothing left to do.
    r = await saga.http.post(f"{config.PEDIDOS}/sagas/{placed['saga_id']}/cancel",
                             json={"reason": "test"})
    assert (r.status_code, r.json()["status"]) == (409, "PENDIENTE_REEMBOLSO")
    order = await saga.wait_terminal(placed["order_id"], timeout=30)
    assert order["status"] == "REEMBOLSO_FALLIDO"
    assert order["refund_status"] == "FAILED"
    payment = (await saga.payments(placed["saga_id"]))[0]
    assert payment["status"] == "REFUND_FAILED" and payment["manual_refund_required"] is True
    assert payment["refund_attempts"] == 5
    assert await saga.money_of(placed["saga_id"]) == (Decimal("5.00"), 1, 0)


async def test_refund_that_fails_transiently_is_retried(saga: Saga) -> None:
    placed = await _lose_the_race(saga, "tok_refundTransient2")
    order = await saga.wait_terminal(placed["order_id"], timeout=20)
    assert order["status"] == "CANCELADA_CON_REEMBOLSO"
    payment = (await saga.payments(placed["saga_id"]))[0]
    assert payment["refund_attempts"] == 3
    assert await saga.money_of(placed["saga_id"]) == (Decimal(0), 1, 1)


async def test_a_gateway_that_stays_down_dead_letters_the_charge_with_an_alert(
        saga: Saga) -> None:
    from saga_harness import config
    from saga_harness.kafka import TopicReader, headers_of

    sku = new_sku()
    await saga.set_stock(sku, 5)
    async with TopicReader("pagos-dlq") as dlq:
        placed = await saga.place(order_body([(sku, 1)], token="tok_transient9"))
        record = await dlq.wait_for(
            lambda r: headers_of(r).get("X-Saga-ID") == placed["saga_id"], timeout=30)
    assert headers_of(record)["X-DLQ-Error-Class"] == "gateway_retries_exhausted"
    payment = (await saga.payments(placed["saga_id"]))[0]
    assert payment["status"] == "CHARGE_FAILED" and payment["charge_attempts"] == 4
    metrics = (await saga.http.get(f"{config.PAGOS}/metrics")).text
    assert 'saga_alerts_total{alert="charge_failed",service="pagos",severity="critical"}' \
        in metrics
    # Nothing was captured; the order stays waiting for its payment deadline or a cancel.
    assert (await saga.order(placed["order_id"]))["status"] == "PENDIENTE_PAGO"
    assert (await saga.money_of(placed["saga_id"]))[1] == 0
    r = await saga.http.post(f"{config.PEDIDOS}/sagas/{placed['saga_id']}/cancel",
                             json={"reason": "test"})
    assert r.status_code == 202
