"""Orders of one customer, or of one card, sent at once against real PostgreSQL, in a scratch
copy of pedidos' tables: each is counted against the limits of POST /orders, and added, while
it holds the customer's and the card's orders (advisory locks until its commit), so a burst is
held to the limits as orders sent one after another; another customer's and another card's
orders do not wait for them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pedidos.adapters.order_repository import OrderRepository
from pedidos.config import PedidosSettings
from pedidos.usecases.decline_velocity import OrderRefused
from pedidos.usecases.fingerprints import Fingerprints
from pedidos.usecases.place_order import PlacedOrder, place_order
from saga_harness import db, sealing
from saga_harness.clients import new_sku, order_body
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "ordersatoncetest"
TABLES = ("orders", "sagas", "saga_audit", "notifications", "outbox", "processed_messages")
FINGERPRINTS = Fingerprints(b"an integration test's key, 32 B+")


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with db.scratch_copy(SCHEMA, "pedidos", TABLES) as copy:
        yield copy


async def _place(scratch: tuple[AsyncEngine, MessagingTables], body: dict[str, Any],
                 settings: PedidosSettings) -> PlacedOrder | OrderRefused:
    engine, tables = scratch
    try:
        async with UnitOfWork(engine, tables, "pedidos") as uow:
            return await place_order(uow, OrderRepository(uow), body, Decimal("5.00"), None,
                                     settings, sealer=sealing.sealing_key(),
                                     fingerprints=FINGERPRINTS)
    except OrderRefused as refused:
        return refused


async def test_a_burst_of_one_customers_orders_is_held_to_its_decline_limit(
        scratch: tuple[AsyncEngine, MessagingTables]) -> None:
    settings = PedidosSettings(declines_per_customer=2, waiting_orders_per_customer=100,
                               waiting_orders_per_card=100)
    customer, sku = f"burst-{uuid.uuid4().hex[:8]}", new_sku()
    answers = await asyncio.gather(*(_place(scratch, order_body(
        [(sku, 1)], token=f"tok_chargeDeclined_{uuid.uuid4().hex[:8]}", customer=customer),
        settings) for _ in range(8)))
    taken = [a for a in answers if isinstance(a, PlacedOrder)]
    assert len(taken) == 2, answers
    async with scratch[0].connect() as conn:
        written = (await conn.execute(text(
            f"SELECT count(*) FROM {SCHEMA}.orders WHERE customer_id = :c"),
            {"c": customer})).scalar_one()
        events = (await conn.execute(text(
            f"SELECT count(*) FROM {SCHEMA}.outbox WHERE event_type = 'OrdenSolicitada'"))
        ).scalar_one()
    assert (written, events) == (2, 2), "a refused order writes nothing"


async def test_a_burst_on_one_card_is_held_to_its_waiting_cap_whoever_the_customers(
        scratch: tuple[AsyncEngine, MessagingTables]) -> None:
    settings = PedidosSettings(waiting_orders_per_card=3)
    card, sku = f"tok_visa_{uuid.uuid4().hex[:8]}", new_sku()
    answers = await asyncio.gather(*(_place(scratch, order_body(
        [(sku, 1)], token=card, customer=f"card-{n}-{uuid.uuid4().hex[:6]}"), settings)
        for n in range(8)))
    assert sum(isinstance(a, PlacedOrder) for a in answers) == 3, answers


async def test_orders_held_wait_for_the_holder_others_do_not(
        scratch: tuple[AsyncEngine, MessagingTables]) -> None:
    engine, tables = scratch
    customer, card = f"held-{uuid.uuid4().hex[:8]}", FINGERPRINTS.card("tok_visa_held")

    async def hold(customer_id: str, card_fingerprint: str) -> None:
        async with UnitOfWork(engine, tables, "pedidos") as uow:
            await OrderRepository(uow).hold_orders_of(customer_id, card_fingerprint)

    async with UnitOfWork(engine, tables, "pedidos") as holder:
        await OrderRepository(holder).hold_orders_of(customer, card)
        # Another customer with another card goes on at once.
        await asyncio.wait_for(hold(f"{customer}-other", "another card"), 10)
        same_customer = asyncio.create_task(hold(customer, "another card"))
        same_card = asyncio.create_task(hold(f"{customer}-other", card))
        done, _ = await asyncio.wait({same_customer, same_card}, timeout=1)
        assert not done, "a unit of work went on while another held its customer or card"
    # The holder ended (rolled back, its locks with it): both go on.
    await asyncio.wait_for(asyncio.gather(same_customer, same_card), 10)


@pytest.mark.parametrize("options", [{"reads_outside_transaction": True},
                                     {"isolation_level": "REPEATABLE READ"}])
async def test_a_unit_of_work_whose_count_would_not_see_the_last_holders_order_is_refused(
        scratch: tuple[AsyncEngine, MessagingTables], options: dict[str, Any]) -> None:
    """In autocommit the locks would end with their statement; with one snapshot per
    transaction, taken before the locks were granted, the count would miss the order the last
    holder committed."""
    engine, tables = scratch
    async with UnitOfWork(engine, tables, "pedidos", **options) as uow:
        with pytest.raises(RuntimeError, match="READ COMMITTED"):
            await OrderRepository(uow).hold_orders_of("someone", "some card")
