"""inventario's handlers on a copy of its tables, as the integration tests drive them: the copy
(``saga_harness.db.scratch_copy`` of the tables a saga step touches), a product in it, and one
record handled as the consumer handles it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from inventario.app import subscriptions
from saga_harness import db
from sagakit.consumer import Handler
from sagakit.context import current_message
from sagakit.message import Message
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

TABLES = ("products", "stock_checks", "allocations", "reservations", "outbox",
          "processed_messages")


@asynccontextmanager
async def scratch_copy(schema: str) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    """A copy of the tables a saga step of inventario touches, in ``schema``: an engine whose
    statements reach it, and its messaging tables."""
    async with db.scratch_copy(schema, "inventario", TABLES) as (engine, tables):
        yield engine, tables


async def add_product(engine: AsyncEngine, schema: str, sku: str, units: int,
                      strategy: str = "check_then_pay") -> None:
    """A product of ``units`` at 5.00 USD in the copy."""
    async with engine.begin() as conn:
        await conn.execute(text(
            f"INSERT INTO {schema}.products (sku, quantity, price, currency, "
            "allocation_strategy) VALUES (:s, :q, 5.00, 'USD', :st)"),
            {"s": sku, "q": units, "st": strategy})


async def deliver(engine: AsyncEngine, tables: MessagingTables, handler: Handler[Any],
                  event: Message[Any]) -> bool:
    """What the consumer does with one record, once: claim it, run the handler in the unit of
    work its subscription asks for (inventario.app), commit. False: its guard wrote nothing
    (the consumer would handle it again)."""
    options = {s.event_type: s for s in subscriptions(None)  # type: ignore[arg-type]
               }[event.event_type].unit_of_work_options
    token = current_message.set(event.envelope)
    try:
        async with UnitOfWork(engine, tables, "inventario", **options) as uow:
            uow.claim(event.message_id, event.event_type, event.saga_id)
            await handler(uow, event)
            if not uow.ended:
                await uow.commit()
            return uow.committed
    finally:
        current_message.reset(token)
