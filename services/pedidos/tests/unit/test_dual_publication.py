"""OrdenSolicitada published in the versions ``PEDIDOS_PUBLISHES_ORDEN_SOLICITADA`` names: each
in the one commit of the order, the second a twin of the first (``sagakit.twins``), the address
written in each version's shape; an operator's retry sends the order again in the versions
published now, whichever version pedidos kept; a version pedidos does not know is refused at
start."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError

from pedidos.config import PedidosSettings
from pedidos.domain.order import OrderStatus
from pedidos.usecases.order_request_versions import as_version, parse_stored
from pedidos.usecases.place_order import place_order
from pedidos.usecases.ports import OperatorAction
from pedidos.usecases.retry_step import STEP_RETRIED, retry_step
from saga_contracts.events.orders import OrdenSolicitada_v4
from saga_harness import sealing
from sagakit.twins import TWIN_OF, claim_id

from .fakes import ORDER_BODY, OrderTables, unit
from .test_place_order import FINGERPRINTS

BOTH = "OrdenSolicitada,OrdenSolicitada_v4"


async def test_both_versions_go_out_in_the_orders_commit_the_second_a_twin_of_the_first() -> None:
    tables = OrderTables()
    uow, orders = unit(tables)
    placed = await place_order(uow, orders, ORDER_BODY, Decimal("10.00"), None,
                               PedidosSettings(publishes_orden_solicitada=BOTH),
                               sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)
    assert uow.commits == 1
    v3, v4 = uow.emitted
    assert (v3.event_type, v3.schema_version) == ("OrdenSolicitada", "3.0.0")
    assert (v4.event_type, v4.schema_version) == ("OrdenSolicitada_v4", "4.0.0")
    assert v3.saga_id == v4.saga_id == placed.saga_id
    assert TWIN_OF not in v3.metadata and v4.metadata[TWIN_OF] == v3.message_id
    assert claim_id(v3) == claim_id(v4) == v3.message_id
    address = ORDER_BODY["shipping_address"]
    assert v3.payload["shipping_address"] == address
    assert v4.payload["shipping_address"] == {
        "lines": [address["street"]], "city": address["city"],
        "country": address["country"], "postal_code": address["postal_code"]}
    same = ("order_id", "customer_id", "items", "total_amount", "currency", "payment_method")
    assert {k: v3.payload[k] for k in same} == {k: v4.payload[k] for k in same}


async def test_only_the_new_version_once_the_old_one_is_no_longer_published() -> None:
    uow, orders = unit(OrderTables())
    await place_order(uow, orders, ORDER_BODY, Decimal("10.00"), None,
                      PedidosSettings(publishes_orden_solicitada="OrdenSolicitada_v4"),
                      sealer=sealing.sealing_key(), fingerprints=FINGERPRINTS)
    [event] = uow.emitted
    assert event.event_type == "OrdenSolicitada_v4" and TWIN_OF not in event.metadata


def test_lines_written_as_one_street_are_joined() -> None:
    token = sealing.sealed("tok_visa", sealing.charge(saga_id="s", order_id="o"))
    request = OrdenSolicitada_v4.model_validate({
        "order_id": "0190e0a8-0000-7000-8000-000000000001", "customer_id": "c-1",
        "items": ORDER_BODY["items"], "total_amount": "10.00", "currency": "USD",
        "shipping_address": {"lines": ["Calle 1", "Piso 2"], "city": "Lima", "country": "PE",
                             "postal_code": "15001"},
        "payment_method": {"type": "credit_card", "token": token}})
    older = as_version(request, "OrdenSolicitada")
    assert older.shipping_address.model_dump() == {
        "street": "Calle 1, Piso 2", "city": "Lima", "country": "PE", "postal_code": "15001"}
    assert parse_stored(request.to_payload()) == request
    assert parse_stored(older.to_payload()) == older


async def test_a_retry_sends_the_kept_order_again_in_the_versions_published_now() -> None:
    tables = OrderTables()
    saga = tables.seed(OrderStatus.PENDIENTE_VALIDACION)
    token = sealing.sealed("tok_visa", sealing.charge(saga_id=saga.saga_id,
                                                      order_id=saga.order_id))
    tables.requests[saga.saga_id] = {
        "order_id": saga.order_id, "customer_id": saga.customer_id,
        "items": ORDER_BODY["items"], "total_amount": "10.00", "currency": "USD",
        "shipping_address": ORDER_BODY["shipping_address"],
        "payment_method": {"type": "credit_card", "token": token}}
    uow, orders = unit(tables)
    sent = await retry_step(uow, orders, saga.saga_id, OperatorAction("ops", STEP_RETRIED, "why"),
                            PedidosSettings(publishes_orden_solicitada="OrdenSolicitada_v4"))
    [event] = uow.emitted
    assert (event.event_type, event.message_id) == ("OrdenSolicitada_v4", sent)
    assert event.payload["payment_method"]["token"] == token


@pytest.mark.parametrize("value", ["OrdenSolicitada_v2", "", "OrdenSolicitada,OrdenSolicitada"])
def test_a_version_pedidos_does_not_publish_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="one or more of"):
        PedidosSettings(publishes_orden_solicitada=value)
