"""A customer who places orders faster than pedidos allows gets 429 with Retry-After, and no
order; another customer is served meanwhile (PEDIDOS_ORDER_RATE_PER_CUSTOMER, _BURST_)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from saga_harness import config, db, stack
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.waiting import wait_for

pytestmark = pytest.mark.usefixtures("running_stack")

BURST = 3


@pytest.fixture
def strict_pedidos() -> Iterator[None]:
    try:
        stack.restart("pedidos", {"PEDIDOS_ORDER_BURST_PER_CUSTOMER": str(BURST),
                                  "PEDIDOS_ORDER_RATE_PER_CUSTOMER": "1"})
        yield
    finally:
        stack.restart("pedidos")


@pytest.mark.usefixtures("strict_pedidos")
async def test_a_customer_over_the_rate_gets_429_and_no_order(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 10)
    customer = f"rate-{uuid.uuid4().hex[:8]}"
    for _ in range(BURST):
        await saga.place(order_body([(sku, 1)], customer=customer))
    refused = await saga.http.post(f"{config.PEDIDOS}/orders",
                                   json=order_body([(sku, 1)], customer=customer))
    assert refused.status_code == 429, refused.text
    retry_after = int(refused.headers["Retry-After"])
    assert retry_after >= 1
    assert await saga.place(order_body([(sku, 1)], customer=f"other-{customer}"))
    assert await db.fetchval("SELECT count(*) FROM pedidos.orders WHERE customer_id = $1",
                             customer) == BURST

    # Asked again within what Retry-After says, the order is taken.
    async def again() -> int:
        r = await saga.http.post(f"{config.PEDIDOS}/orders",
                                 json=order_body([(sku, 1)], customer=customer))
        return r.status_code

    assert await wait_for(again, lambda status: status == 202, timeout=retry_after + 5,
                          what="an order taken after Retry-After", interval=0.25) == 202
