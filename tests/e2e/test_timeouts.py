"""Persistent timers: a step deadline, a payment that succeeds after its deadline, the saga's
deadline. pedidos is restarted with short deadlines for these tests, then restored."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import paused, reconfigured
from saga_harness.waiting import wait_for

SHORT_STEPS = {"SAGA_ALLOW_UNSAFE_LIMITS": "1", "PEDIDOS_VALIDATION_TIMEOUT_S": "1",
               "PEDIDOS_PAYMENT_TIMEOUT_S": "1", "PEDIDOS_DEADLINE_SCAN_INTERVAL_S": "0.2"}
SHORT_SAGA = {"SAGA_ALLOW_UNSAFE_LIMITS": "1", "PEDIDOS_SAGA_TIMEOUT_S": "1.5",
              "PEDIDOS_DEADLINE_SCAN_INTERVAL_S": "0.2"}


@pytest.fixture(scope="module")
def short_step_deadlines(running_stack: None) -> Iterator[None]:
    with reconfigured("pedidos", SHORT_STEPS):
        yield


async def test_validation_timeout(saga: Saga, short_step_deadlines: None) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    with paused("inventario"):
        placed = await saga.place(order_body([(sku, 1)]))
        order = await saga.wait_terminal(placed["order_id"], timeout=10)
    assert order["status"] == "CANCELADA_TIMEOUT" and order["cancel_reason"] == "timeout"
    history = await saga.history(placed["saga_id"])
    timed_out = [e for e in history if e["event_type"] == "StepTimedOut"]
    assert timed_out and timed_out[0]["detail"]["step"] == "validacion"
    assert timed_out[0]["detail"]["elapsed_ms"] >= 1000
    # inventario wakes up and validates a cancelled order: nothing is charged or kept.
    await saga.wait_no_net_charge(placed["saga_id"])
    await wait_for(lambda: saga.stock(sku), lambda q: q == 5, timeout=10, what="stock intact")


async def test_payment_that_times_out_and_succeeds_late_is_refunded(
        saga: Saga, short_step_deadlines: None) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    placed = await saga.place(order_body([(sku, 1)], token="tok_slow"))
    order = await saga.wait_terminal(placed["order_id"], timeout=10)
    assert order["status"] == "CANCELADA_TIMEOUT"
    await saga.wait_no_net_charge(placed["saga_id"], timeout=30)
    assert await saga.money_of(placed["saga_id"]) == (Decimal(0), 1, 1)
    assert await saga.stock(sku) == 5
    order = await wait_for(lambda: saga.order(placed["order_id"]),
                           lambda o: o["refund_status"] == "REFUNDED", timeout=10,
                           what="refund recorded")
    assert order["status"] == "CANCELADA_TIMEOUT", "a terminal order never changes"


async def test_saga_deadline_compensates_and_marks_timed_out(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    with reconfigured("pedidos", SHORT_SAGA):
        placed = await saga.place(order_body([(sku, 1)], token="tok_slow"))
        order = await saga.wait_terminal(placed["order_id"], timeout=10)
        assert order["status"] == "TIMED_OUT" and order["cancel_reason"] == "saga_expirada"
        events = [e["event_type"] for e in await saga.history(placed["saga_id"])]
        assert "SagaExpirada" in events
        await saga.wait_no_net_charge(placed["saga_id"], timeout=30)
        await wait_for(lambda: saga.stock(sku), lambda q: q == 5, timeout=10,
                       what="stock intact")
