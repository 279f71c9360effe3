"""A payment's manual resolution on the real PostgreSQL (a scratch copy of pagos' tables): the
operator action is written with its reference, once per payment whatever races (the partial
unique index arbitrates, and the loser is answered from the winner), and a payment that needs
no one gets none."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos.adapters.resolutions import ResolutionRepository, payments_needing_a_person
from pagos.usecases.resolve_payment import (
    NothingToResolve,
    Resolved,
    ResolvedOtherwise,
    resolve_payment,
)
from saga_harness import db
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "paymentresolve"

Scratch = tuple[AsyncEngine, MessagingTables]


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[Scratch]:
    async with db.scratch_copy(SCHEMA, "pagos", ("payments", "operator_actions", "outbox",
                                                 "processed_messages")) as copy:
        yield copy


async def _payment(engine: AsyncEngine, status: str, manual: bool) -> str:
    """A payment in the scratch copy (raw SQL names its schema: the engine's translation
    reaches only the tables' models)."""
    payment_id = str(uuid.uuid4())
    async with engine.begin() as conn:
        await conn.execute(text(
            f"INSERT INTO {SCHEMA}.payments (payment_id, saga_id, status, amount, currency, "
            "manual_refund_required) VALUES (:p, :s, :st, 5.00, 'USD', :m)"),
            {"p": uuid.UUID(payment_id), "s": str(uuid.uuid4()), "st": status, "m": manual})
    return payment_id


async def _resolve(scratch: Scratch, payment_id: str, operator: str, reference: str
                   ) -> Resolved:
    engine, tables = scratch
    async with UnitOfWork(engine, tables, "pagos") as uow:
        return await resolve_payment(uow, ResolutionRepository(uow), payment_id,
                                     operator=operator, reference=reference, note="by hand")


async def _actions(engine: AsyncEngine, payment_id: str) -> list[tuple[str, str, str]]:
    async with engine.connect() as conn:
        rows = await conn.execute(text(
            f"SELECT operator, action, detail->>'reference' FROM {SCHEMA}.operator_actions "
            "WHERE target = :t"), {"t": payment_id})
        return [tuple(r) for r in rows]


async def test_a_resolution_is_written_once_with_its_reference(scratch: Scratch) -> None:
    engine, _ = scratch
    payment_id = await _payment(engine, "REFUND_FAILED", True)
    async with engine.connect() as conn:
        assert await payments_needing_a_person(conn) == 1
    done = await _resolve(scratch, payment_id, "ops-ana", "FIN-1")
    assert done.created and done.resolution.at is not None
    again = await _resolve(scratch, payment_id, "ops-bob", "FIN-1")
    assert not again.created and again.resolution == done.resolution
    assert await _actions(engine, payment_id) == [("ops-ana", "payment_resolved", "FIN-1")]
    async with engine.connect() as conn:
        assert await payments_needing_a_person(conn) == 0


@pytest.mark.parametrize("references", [("FIN-A", "FIN-B"), ("FIN-A", "FIN-A")])
async def test_two_resolutions_racing_write_one(scratch: Scratch,
                                                references: tuple[str, str]) -> None:
    engine, _ = scratch
    payment_id = await _payment(engine, "REFUND_FAILED", True)
    answers = await asyncio.gather(
        *(_resolve(scratch, payment_id, f"ops-{i}", ref) for i, ref in enumerate(references)),
        return_exceptions=True)
    written = await _actions(engine, payment_id)
    assert len(written) == 1
    created = [a for a in answers if isinstance(a, Resolved) and a.created]
    assert len(created) == 1
    if references[0] == references[1]:
        assert all(isinstance(a, Resolved) for a in answers)
    else:
        assert sum(isinstance(a, ResolvedOtherwise) for a in answers) == 1


async def test_a_payment_that_needs_no_one_gets_no_resolution(scratch: Scratch) -> None:
    engine, _ = scratch
    payment_id = await _payment(engine, "CAPTURED", False)
    with pytest.raises(NothingToResolve):
        await _resolve(scratch, payment_id, "ops", "FIN-X")
    assert await _actions(engine, payment_id) == []
