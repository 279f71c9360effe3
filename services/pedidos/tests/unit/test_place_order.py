"""place_order without a database: the saga's first event names the request's span as its
parent (Part I §7.1), and the saga's row keeps that span."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from decimal import Decimal

from pedidos.adapters.known_sagas import KnownSagas
from pedidos.adapters.tables import messaging
from pedidos.config import PedidosSettings
from pedidos.usecases.place_order import place_order
from sagakit.envelope import new_span_id
from sagakit.store.commit_statement import StagedWrite
from sagakit.store.unit_of_work import UnitOfWork
from sqlalchemy.ext.asyncio import create_async_engine

BODY = {
    "customer_id": "c-1",
    "items": [{"sku": "SKU-1", "quantity": 2, "price": "5.00"}],
    "currency": "USD",
    "shipping_address": {"street": "s", "city": "c", "country": "PE", "postal_code": "1"},
    "payment_method": {"type": "credit_card", "token": "tok_visa"},
}


class _Recorded(UnitOfWork):
    """Keeps what would be written; its commit reports the saga row as the database would."""

    staged: StagedWrite | None = None

    def stage(self, write: StagedWrite) -> None:
        self.staged = write
        super().stage(write)

    async def commit(self) -> bool:
        now = datetime.now(UTC)
        self.returned = [{"saga_id": self.emitted[0].saga_id, "status": "PENDIENTE_VALIDACION",
                          "started_at": now, "step_started_at": now, "step_deadline_at": now,
                          "expires_at": now, "db_now": now}]
        self.committed = self.ended = True
        return True


def _uow() -> _Recorded:
    # Never connected: nothing here reaches the database.
    return _Recorded(create_async_engine("postgresql+asyncpg://nobody@127.0.0.1:9/none"),
                     messaging, "pedidos")


async def test_orden_solicitada_names_the_request_span_as_its_parent() -> None:
    uow, request_span = _uow(), new_span_id()
    await place_order(uow, BODY, Decimal("10.00"), None, PedidosSettings(), KnownSagas(),
                      request_span_id=request_span)
    [event] = uow.emitted
    assert event.event_type == "OrdenSolicitada"
    assert event.parent_span_id == request_span != event.span_id
    headers = event.kafka_headers()
    assert (headers["X-Saga-ID"], headers["X-Span-ID"], headers["X-Parent-Span-ID"]) == (
        event.saga_id, event.span_id, request_span)
    assert uow.staged is not None
    assert json.loads(uow.staged.params["context"])["request_span_id"] == request_span


async def test_an_order_placed_outside_a_request_still_has_a_parent_span() -> None:
    uow = _uow()
    await place_order(uow, BODY, Decimal("10.00"), None, PedidosSettings(), KnownSagas())
    [event] = uow.emitted
    assert event.parent_span_id and uuid.UUID(event.parent_span_id)
    assert event.parent_span_id != event.span_id
    assert uow.staged is not None
    assert json.loads(uow.staged.params["context"])["request_span_id"] == event.parent_span_id
