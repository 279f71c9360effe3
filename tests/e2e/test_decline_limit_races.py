"""The decline limits of ``POST /orders`` against a card tester who does not wait its turn.

One who cancels its orders: a decline counts whatever became of its order. The barrier:
pedidos' consumer cannot commit, its inbox table locked against inserts, until the gateway
declined the charge and the customer cancelled the order. One who sends its orders at once:
none of their declines is known when they arrive, yet each order still waiting for its payment
counts as a decline to come, so no more are taken, and their cards tried, than the limit."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pytest

from saga_harness import config
from saga_harness.api_instance import api_instance
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import row_locked
from saga_harness.identity import bearer, customer_token
from saga_harness.waiting import wait_for

pytestmark = pytest.mark.usefixtures("running_stack")

PER_CUSTOMER, PER_CARD, WINDOW_S = 2, 3, 300
TIGHT = {"PEDIDOS_DECLINES_PER_CUSTOMER": str(PER_CUSTOMER),
         "PEDIDOS_DECLINES_PER_CARD": str(PER_CARD), "PEDIDOS_DECLINE_WINDOW_S": str(WINDOW_S)}


@pytest.fixture(scope="module")
def tight_instance() -> Iterator[str]:
    """A pedidos instance with tight decline limits, API only: the limits are counted in the
    database the stack's pedidos writes its orders to."""
    with api_instance("pedidos", TIGHT, name="decline-races") as base:
        yield base


async def test_declines_cancelled_by_the_customer_still_count_against_the_limit(
        saga: Saga, tight_instance: str) -> None:
    sku, customer = new_sku(), f"tester-{uuid.uuid4().hex[:8]}"
    await saga.set_stock(sku, 100)
    as_customer = bearer(customer_token(customer))
    seen = []
    for _ in range(PER_CUSTOMER):
        card = f"tok_chargeDeclined_{uuid.uuid4().hex[:12]}"
        async with row_locked("SELECT 1") as conn:
            await conn.execute("LOCK TABLE pedidos.processed_messages IN EXCLUSIVE MODE")
            placed = await saga.http.post(
                f"{tight_instance}/orders",
                json=order_body([(sku, 1)], token=card, customer=customer))
            assert placed.status_code == 202, placed.text
            saga_id, order_id = placed.json()["saga_id"], placed.json()["order_id"]
            await wait_for(lambda s=saga_id: saga.payments(s),
                           lambda ps: bool(ps) and ps[0]["status"] == "DECLINED", timeout=20,
                           what="the gateway declined the charge")
            cancelled = await saga.http.post(f"{tight_instance}/sagas/{saga_id}/cancel",
                                             headers=as_customer)
            assert cancelled.status_code == 202, cancelled.text
        await saga.wait_terminal(order_id, timeout=20)
        # What the card tester reads: its payment was declined.
        mine = await saga.http.get(f"{config.PAGOS}/payments", params={"saga_id": saga_id},
                                   headers=as_customer)
        seen.append((mine.json()[0]["status"], (await saga.order(order_id))["status"]))
    assert seen == [("DECLINED", "CANCELADA_POR_USUARIO")] * PER_CUSTOMER, seen
    again = await saga.http.post(f"{tight_instance}/orders", json=order_body(
        [(sku, 1)], token=f"tok_chargeDeclined_{uuid.uuid4().hex[:12]}", customer=customer))
    assert again.status_code == 429, (
        f"{PER_CUSTOMER} charges of this customer were declined at the gateway within the "
        f"window (the customer read each as DECLINED), yet its next order is taken: "
        f"{again.status_code} {again.text}")


async def test_a_burst_of_orders_is_held_to_the_limit_like_orders_one_after_another(
        saga: Saga, tight_instance: str) -> None:
    """A card tester sends its orders at once instead of one after another: the limit counts
    the declines pedidos has heard of, none of the burst's when it arrives, and the orders
    still waiting for their payment."""
    sku, customer = new_sku(), f"burst-{uuid.uuid4().hex[:8]}"
    await saga.set_stock(sku, 100)
    burst = PER_CUSTOMER * 4

    async def place() -> httpx.Response:
        return await saga.http.post(f"{tight_instance}/orders", json=order_body(
            [(sku, 1)], token=f"tok_chargeDeclined_{uuid.uuid4().hex[:12]}", customer=customer))

    answers = await asyncio.gather(*(place() for _ in range(burst)))
    taken = [a.json() for a in answers if a.status_code == 202]
    for order in taken:
        await saga.wait_status(order["order_id"], "CANCELADA_PAGO_RECHAZADO", timeout=30)
    assert len(taken) <= PER_CUSTOMER, (
        f"a burst of {burst} orders had {len(taken)} taken and declined at the gateway; the "
        f"customer's limit is {PER_CUSTOMER} declines "
        f"(answers {sorted(a.status_code for a in answers)})")
    # Refused while the orders taken wait, or once their declines are heard.
    refused = [a for a in answers if a.status_code != 202]
    assert all(a.status_code == 429 and a.json()["detail"].startswith((
        "too many orders waiting for their payment", "too many declined payments lately"))
        for a in refused), [(a.status_code, a.text) for a in refused]
