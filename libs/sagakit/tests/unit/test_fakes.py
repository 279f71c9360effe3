"""The fake unit of work builds events as the real one does and writes nothing on a failed guard."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from saga_contracts.events.inventory import StockLiberado
from saga_contracts.registry import SchemaViolation
from sagakit.context import current_message
from sagakit.envelope import Envelope
from sagakit.fakes import FakeUnitOfWork
from sagakit.ports import UnitOfWorkPort


def _cause() -> Envelope:
    return Envelope.new(saga_id="saga-1", event_type="OrdenCancelada", schema_version="1.0.0",
                        source_service="pedidos", payload={}, metadata={"correlation_id": "c-1"})


async def test_events_take_the_saga_and_causation_of_the_message_being_handled() -> None:
    uow: UnitOfWorkPort = FakeUnitOfWork("inventario")
    cause = _cause()
    token = current_message.set(cause)
    try:
        event = uow.emit(StockLiberado(order_id=str(uuid.uuid4()), items=()))
    finally:
        current_message.reset(token)
    assert event.saga_id == "saga-1"
    assert event.parent_span_id == cause.span_id
    assert event.metadata["causation_id"] == cause.message_id
    assert event.metadata["correlation_id"] == "c-1"


async def test_an_event_its_schema_refuses_fails_as_in_production() -> None:
    uow = FakeUnitOfWork("inventario")
    with pytest.raises(ValidationError):
        StockLiberado(order_id="not-a-uuid", items=())
    # A model built without validation still meets the schema's check on the way out.
    with pytest.raises(SchemaViolation):
        uow.emit(StockLiberado.model_construct(order_id="not-a-uuid", items=()),
                 saga_id="saga-1")


async def test_a_failed_guard_writes_nothing_and_runs_nothing_after_commit() -> None:
    ran: list[str] = []
    uow = FakeUnitOfWork(commit_result=False)
    uow.emit(StockLiberado(order_id=str(uuid.uuid4()), items=()), saga_id="s")
    uow.after_commit(lambda: ran.append("x"))
    assert await uow.commit() is False
    assert uow.emitted == [] and ran == [] and not uow.committed
