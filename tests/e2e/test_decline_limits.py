"""Against card testing: a customer, or a card, with too many payments declined lately gets
``429`` with ``Retry-After`` from ``POST /orders``, and no order; the limits are counted in
pedidos' database, so an instance that never saw those declines refuses the same (the stack's
pedidos learns them, a second pedidos process started here answers). A customer reading its
payments learns that a charge was declined, never the gateway's decline code nor the attempt
log; an operator does.

pedidos is restarted with tight limits (PEDIDOS_DECLINES_PER_CUSTOMER 2, _PER_CARD 3, a 30-s
window) and restored afterwards; each test's declines are made with cards of its own
(``tok_chargeDeclined_<suffix>``, which the fake gateway declines), so that no other test's
count in."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from saga_harness import config, db, identity, stack
from saga_harness.api_instance import api_instance
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.waiting import wait_for

pytestmark = pytest.mark.usefixtures("running_stack")

PER_CUSTOMER, PER_CARD, WINDOW_S = 2, 3, 30
TIGHT = {"PEDIDOS_DECLINES_PER_CUSTOMER": str(PER_CUSTOMER),
         "PEDIDOS_DECLINES_PER_CARD": str(PER_CARD), "PEDIDOS_DECLINE_WINDOW_S": str(WINDOW_S)}


@pytest.fixture(scope="module")
def tight_pedidos() -> Iterator[None]:
    try:
        stack.restart("pedidos", TIGHT)
        yield
    finally:
        stack.restart("pedidos")


@pytest.fixture(scope="module")
def other_instance(tight_pedidos: None) -> Iterator[str]:
    """Another pedidos instance, API only: it consumes nothing, so it learns no decline but
    from the database."""
    with api_instance("pedidos", TIGHT, name="declines") as base:
        yield base


@pytest.fixture
async def sku(saga: Saga) -> AsyncIterator[str]:
    sku = new_sku()
    await saga.set_stock(sku, 100)
    yield sku


def _card() -> str:
    return f"tok_chargeDeclined_{uuid.uuid4().hex[:12]}"


async def _declined(saga: Saga, body: dict[str, object]) -> dict[str, object]:
    placed = await saga.place(body)
    await saga.wait_status(str(placed["order_id"]), "CANCELADA_PAGO_RECHAZADO", timeout=30)
    return placed


async def _orders_of(customer: str) -> int:
    return int(await db.fetchval("SELECT count(*) FROM pedidos.orders WHERE customer_id = $1",
                                 customer))


async def test_a_customer_with_too_many_declines_is_refused_by_every_instance(
        saga: Saga, sku: str, other_instance: str) -> None:
    customer = f"declines-{uuid.uuid4().hex[:8]}"
    for _ in range(PER_CUSTOMER):  # each with another card: the customer's limit, not a card's
        await _declined(saga, order_body([(sku, 1)], token=_card(), customer=customer))
    for base in (other_instance, config.PEDIDOS):
        refused = await saga.http.post(f"{base}/orders", json=order_body(
            [(sku, 1)], token="tok_visa", customer=customer))
        assert refused.status_code == 429, (base, refused.text)
        assert refused.json()["detail"].startswith("too many declined payments")
        assert 1 <= int(refused.headers["Retry-After"]) <= WINDOW_S
    assert await _orders_of(customer) == PER_CUSTOMER
    # Another customer is served meanwhile, by the same instance.
    other = await saga.http.post(f"{other_instance}/orders", json=order_body(
        [(sku, 1)], token="tok_visa", customer=f"other-{customer}"))
    assert other.status_code == 202, other.text

    # Once the oldest decline has left the window (Retry-After), the customer may order again.
    async def again() -> httpx.Response:
        return await saga.http.post(f"{other_instance}/orders", json=order_body(
            [(sku, 1)], token="tok_visa", customer=customer))

    taken = await wait_for(again, lambda r: r.status_code != 429, timeout=WINDOW_S + 10,
                           what="an order taken once a decline left the window", interval=1)
    assert taken.status_code == 202, taken.text


async def test_a_card_with_too_many_declines_is_refused_whoever_the_customer(
        saga: Saga, sku: str, other_instance: str) -> None:
    card = _card()
    run = uuid.uuid4().hex[:8]
    for n in range(PER_CARD):
        await _declined(saga, order_body([(sku, 1)], token=card, customer=f"card-{run}-{n}"))
    newcomer = f"card-{run}-new"
    refused = await saga.http.post(f"{other_instance}/orders", json=order_body(
        [(sku, 1)], token=card, customer=newcomer))
    assert refused.status_code == 429, refused.text
    assert 1 <= int(refused.headers["Retry-After"]) <= WINDOW_S
    assert await _orders_of(newcomer) == 0
    # The same customer with another card is not refused: the card was.
    taken = await saga.http.post(f"{other_instance}/orders", json=order_body(
        [(sku, 1)], token="tok_visa", customer=newcomer))
    assert taken.status_code == 202, taken.text
    # The card's fingerprint is stored, never the card.
    stored = await db.fetch("SELECT card_fingerprint, request_hash FROM pedidos.orders "
                            "WHERE customer_id LIKE $1", f"card-{run}-%")
    assert all(card not in (r["card_fingerprint"] or "") for r in stored)
    assert len({r["card_fingerprint"] for r in stored}) == 2  # the declined card, tok_visa
    assert all(r["request_hash"].startswith("hmac-sha256:") for r in stored)


async def test_a_customer_sees_a_coarse_decline_and_an_operator_the_gateways_reason(
        saga: Saga, sku: str) -> None:
    customer = f"coarse-{uuid.uuid4().hex[:8]}"
    placed = await _declined(saga, order_body([(sku, 1)], token=_card(), customer=customer))
    params = {"saga_id": str(placed["saga_id"])}
    as_customer = await saga.http.get(f"{config.PAGOS}/payments", params=params,
                                      headers=identity.bearer(identity.customer_token(customer)))
    assert as_customer.status_code == 200, as_customer.text
    [mine] = as_customer.json()
    assert (mine["status"], mine["decline_code"], mine["attempts"]) == (
        "DECLINED", "declined", [])
    assert "generic_decline" not in as_customer.text
    as_operator = await saga.http.get(f"{config.PAGOS}/payments", params=params,
                                      headers=identity.operator_headers())
    [detailed] = as_operator.json()
    assert detailed["decline_code"] == "generic_decline"
