"""An order placed against real PostgreSQL, in a scratch copy of pedidos' tables: what pedidos
writes (the order, its saga, its history, OrdenSolicitada in the outbox) holds the payment token
sealed for pagos only, never in the clear."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pedidos.adapters.order_repository import OrderRepository
from pedidos.config import PedidosSettings
from pedidos.usecases.fingerprints import Fingerprints
from pedidos.usecases.place_order import place_order
from saga_contracts.sealing import is_sealed
from saga_harness import db, sealing
from saga_harness.clients import new_sku, order_body
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "sealedtokentest"
TABLES = ("orders", "sagas", "saga_audit", "notifications", "outbox", "processed_messages")


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with db.scratch_copy(SCHEMA, "pedidos", TABLES) as copy:
        yield copy


async def test_pedidos_writes_the_token_sealed_only(
        scratch: tuple[AsyncEngine, MessagingTables]) -> None:
    engine, tables = scratch
    token = f"tok_visa_{uuid.uuid4().hex}"
    body = order_body([(new_sku(), 1)], token=token)
    async with UnitOfWork(engine, tables, "pedidos") as uow:
        placed = await place_order(uow, OrderRepository(uow), body, Decimal("5.00"),
                                   None, PedidosSettings(),
                                   sealer=sealing.sealing_key(),
                                   fingerprints=Fingerprints(b"an integration test's key, 32 B+"))
    async with engine.connect() as conn:
        sealed = (await conn.execute(text(
            f"SELECT payload->'payload'->'payment_method'->>'token' FROM {SCHEMA}.outbox "
            "WHERE saga_id = :s AND event_type = 'OrdenSolicitada'"),
            {"s": placed.saga_id})).scalar_one()
        holding = [table for table in TABLES if (await conn.execute(text(
            f"SELECT count(*) FROM {SCHEMA}.{table} AS r WHERE strpos(r::text, :t) > 0"),
            {"t": token})).scalar_one()]
    assert is_sealed(sealed)
    charge = sealing.charge(saga_id=placed.saga_id, order_id=placed.order_id, amount="5.00",
                            customer_id=body["customer_id"])
    assert sealing.opening_keys().open(sealed, charge) == token
    assert holding == []
