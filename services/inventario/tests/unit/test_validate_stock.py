"""validate_stock: OrdenSolicitada → StockVerificado | StockNoDisponible | PrecioRechazado(_v2), the
check recorded with the commit (a verified one with the payment it asks pagos for: the lines at
their catalog prices), no stock taken; nothing checked for a saga cancelled first."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line
from inventario.usecases.validate_stock import ValidationPolicy, validate_stock
from saga_contracts.events.orders import OrderRequest
from saga_harness.events import PAYMENT_METHOD, handling, orden_solicitada, orden_solicitada_v4
from sagakit.message import Message
from sagakit.twins import TWIN_OF

from .fakes import Allocation, FakeStockRepository, Inventory, StagingUnitOfWork, StockCheck

EUR_2_50 = Money(Decimal("2.50"), "EUR")
DEFAULT_POLICY = ValidationPolicy()


async def _handle(inventory: Inventory, event: Message[OrderRequest],
                  policy: ValidationPolicy = DEFAULT_POLICY,
                  **repository: Any) -> StagingUnitOfWork:
    """``event`` handled as the consumer hands it over, on ``inventory`` (``repository``: the
    fake repository's options)."""
    uow = StagingUnitOfWork()
    with handling(event):
        await validate_stock(uow, FakeStockRepository(inventory, uow, **repository), event,
                             policy)
    return uow


async def _validate(inventory: Inventory, *items: tuple[str, int], saga_id: str | None = None,
                    policy: ValidationPolicy = DEFAULT_POLICY,
                    **order: Any) -> tuple[StagingUnitOfWork, str, str]:
    event = orden_solicitada(*items, saga_id=saga_id, **order)
    return await _handle(inventory, event, policy), event.saga_id, event.payload.order_id


async def test_stock_on_hand_is_verified_with_the_lines_merged_and_nothing_taken() -> None:
    inventory = Inventory()
    inventory.put("A", 5, EUR_2_50)
    inventory.put("B", 1, Money(Decimal("7.5"), "EUR"))
    uow, saga_id, order_id = await _validate(inventory, ("B", 1), ("A", 2), ("A", 3),
                                             prices={"B": "7.50"})

    assert uow.commits == 1 and uow.committed
    [event] = uow.emitted
    assert event.event_type == "StockVerificado" and event.saga_id == saga_id
    assert event.payload == {"order_id": order_id,
                             "items": [{"sku": "A", "quantity": 5, "unit_price": "2.50"},
                                       {"sku": "B", "quantity": 1, "unit_price": "7.50"}],
                             "total_amount": "20.00", "currency": "EUR",
                             "payment_method": PAYMENT_METHOD,
                             "allocation_strategy": "check_then_pay"}
    assert inventory.checks == {saga_id: StockCheck(order_id, [Line("A", 5), Line("B", 1)],
                                                    "verified", Money(Decimal("20.00"), "EUR"))}
    assert inventory.products == {"A": 5, "B": 1}
    assert inventory.allocations == {}


async def test_the_amount_asked_for_is_the_catalogs_in_a_currency_without_decimals() -> None:
    inventory = Inventory()
    inventory.put("A", 5, Money(Decimal("1000"), "CLP"))
    uow, saga_id, _ = await _validate(inventory, ("A", 1), price="1000.00", currency="CLP")

    [event] = uow.emitted
    assert (event.payload["total_amount"], event.payload["currency"]) == ("1000.00", "CLP")
    assert inventory.checks[saga_id].payment_requested == Money(Decimal("1000"), "CLP")


async def test_too_few_units_or_an_unknown_product_make_the_stock_unavailable() -> None:
    inventory = Inventory()
    inventory.put("A", 2, EUR_2_50)
    inventory.put("B", 9)  # unpriced too: stock is told first
    uow, saga_id, order_id = await _validate(inventory, ("A", 3), ("B", 1), ("Z", 1))

    assert uow.committed
    assert uow.emitted_types == ["StockNoDisponible"]
    assert uow.emitted[0].payload == {
        "order_id": order_id, "reason": "stock insuficiente",
        "unavailable": [{"sku": "A", "requested": 3, "available": 2},
                        {"sku": "Z", "requested": 1, "available": 0}]}
    assert inventory.checks[saga_id] == StockCheck(
        order_id, [Line("A", 3), Line("B", 1), Line("Z", 1)], "unavailable", None)
    assert inventory.products == {"A": 2, "B": 9}


async def test_a_price_below_the_catalogs_is_refused_and_nothing_asked_for() -> None:
    """A client that names 0.01 for a product priced 50.00 is not charged 0.01, nor 50.00:
    its order is refused before any charge."""
    inventory = Inventory()
    inventory.put("A", 5, Money(Decimal("50.00"), "USD"))
    uow, saga_id, order_id = await _validate(inventory, ("A", 1), price="0.01", currency="USD")

    assert uow.committed and uow.emitted_types == ["PrecioRechazado_v2", "PrecioRechazado"]
    refused = {"sku": "A", "price": "0.01", "currency": "USD", "catalog_price": "50.00",
               "catalog_currency": "USD"}
    assert uow.emitted[0].payload == {
        "order_id": order_id, "reason": "not the catalog's price",
        "refused": [{**refused, "problem": "other_price"}]}
    assert uow.emitted[1].payload == {
        "order_id": order_id, "reason": "precio distinto del catálogo",
        "refused": [{**refused, "problem": "precio_distinto"}]}
    assert inventory.checks[saga_id] == StockCheck(order_id, [Line("A", 1)], "price_refused",
                                                   None)
    assert inventory.products == {"A": 5}


async def test_a_product_in_another_currency_or_without_a_price_is_refused() -> None:
    inventory = Inventory()
    inventory.put("A", 5, EUR_2_50)
    inventory.put("B", 5, Money(Decimal("2.50"), "USD"))
    inventory.put("C", 5)
    uow, _, _ = await _validate(inventory, ("A", 1), ("B", 1), ("C", 1), currency="EUR")

    assert uow.emitted_types == ["PrecioRechazado_v2", "PrecioRechazado"]
    assert uow.emitted[0].payload["refused"] == [
        {"sku": "B", "problem": "other_currency", "price": "2.50", "currency": "EUR",
         "catalog_price": "2.50", "catalog_currency": "USD"},
        {"sku": "C", "problem": "not_priced", "price": "2.50", "currency": "EUR"}]
    assert [line["problem"] for line in uow.emitted[1].payload["refused"]] == [
        "moneda_distinta", "sin_precio"]


async def test_a_price_refusal_goes_out_in_the_versions_published_the_later_ones_as_twins(
        ) -> None:
    """Both versions of one refusal are one event: the second names the first's message id,
    so a consumer that reads both handles the saga's refusal once (sagakit.twins)."""
    inventory = Inventory()
    inventory.put("A", 5, EUR_2_50)
    uow, saga_id, _ = await _validate(inventory, ("A", 1), price="9.99")

    first, second = uow.emitted
    assert first.saga_id == second.saga_id == saga_id
    assert TWIN_OF not in first.metadata and second.metadata[TWIN_OF] == first.message_id


@pytest.mark.parametrize("versions", [("PrecioRechazado",), ("PrecioRechazado_v2",),
                                      ("PrecioRechazado", "PrecioRechazado_v2")])
async def test_a_price_refusal_goes_out_in_exactly_the_versions_set(
        versions: tuple[str, ...]) -> None:
    inventory = Inventory()
    inventory.put("A", 5, EUR_2_50)
    uow, _, _ = await _validate(inventory, ("A", 1), price="9.99",
                                policy=ValidationPolicy(price_refusal_versions=versions))

    assert uow.emitted_types == list(versions)


async def test_a_price_refusal_answered_again_goes_out_in_the_versions_published_now() -> None:
    """Recorded while inventario published PrecioRechazado alone; handled again after it moved
    to PrecioRechazado_v2: the same refusal, in the version its consumers read now."""
    inventory = Inventory()
    inventory.put("A", 5, EUR_2_50)
    uow, saga_id, _ = await _validate(inventory, ("A", 1), price="9.99",
                                      policy=ValidationPolicy(
                                          price_refusal_versions=("PrecioRechazado",)))
    [recorded] = uow.emitted

    again, _, _ = await _validate(inventory, ("A", 1), saga_id=saga_id, price="9.99",
                                  policy=ValidationPolicy(
                                      price_refusal_versions=("PrecioRechazado_v2",)))

    assert again.committed and again.emitted_types == ["PrecioRechazado_v2"]
    assert [line["problem"] for line in again.emitted[0].payload["refused"]] == ["other_price"]
    assert again.emitted[0].payload["order_id"] == recorded.payload["order_id"]


@pytest.mark.parametrize("status", [AllocationStatus.BLOCKED, AllocationStatus.RELEASED])
async def test_a_saga_with_an_allocation_is_not_checked(status: AllocationStatus) -> None:
    """Its order was cancelled before its check (BLOCKED), or the request comes again after
    the saga went on: nothing left to check."""
    inventory = Inventory()
    inventory.put("A", 5, EUR_2_50)
    inventory.allocations["saga-1"] = Allocation(None, status, [])
    uow, _, _ = await _validate(inventory, ("A", 1), saga_id="saga-1")

    assert uow.commits == 1 and uow.committed  # the message is recorded as processed
    assert uow.emitted == []
    assert inventory.checks == {}


async def test_a_saga_checked_already_is_answered_as_its_check_answered() -> None:
    """Its OrdenSolicitada handled again (an operator's retry, a replay) after the product was
    restocked: the StockNoDisponible on its way to pedidos is sent again, never a
    StockVerificado that pagos would charge for an order about to be cancelled."""
    inventory = Inventory()
    inventory.put("A", 0, EUR_2_50)
    first = orden_solicitada(("A", 1))
    [answer] = (await _handle(inventory, first)).emitted
    inventory.put("A", 5, EUR_2_50)

    again, _, _ = await _validate(inventory, ("A", 1), saga_id=first.saga_id)

    assert again.committed and again.emitted_types == ["StockNoDisponible"]
    assert again.emitted[0].payload == answer.payload
    assert inventory.checks[first.saga_id].result == "unavailable"


async def test_a_check_recorded_meanwhile_keeps_its_place_and_this_one_writes_nothing() -> None:
    """Two checks of one saga at once: the one that commits second writes nothing (its answer
    included); handled again, it answers as the first did."""
    inventory = Inventory()
    inventory.put("A", 5, EUR_2_50)
    event = orden_solicitada(("A", 1))
    recorded = StockCheck(event.payload.order_id, [Line("A", 1)], "unavailable", None)

    def first_commits(inv: Inventory) -> None:
        inv.checks[event.saga_id] = recorded

    uow = await _handle(inventory, event, meanwhile=first_commits)

    assert uow.commits == 1 and not uow.committed
    assert uow.emitted == []
    assert inventory.checks == {event.saga_id: recorded}


async def test_a_check_recorded_without_its_answer_is_not_answered_again() -> None:
    """Checks recorded before answers were kept: nothing is sent rather than a new check's
    answer; the message is recorded as handled."""
    inventory = Inventory()
    inventory.put("A", 5, EUR_2_50)
    inventory.checks["saga-1"] = StockCheck("o-1", [Line("A", 1)], "unavailable", None)
    uow, _, _ = await _validate(inventory, ("A", 1), saga_id="saga-1")

    assert uow.commits == 1 and uow.committed
    assert uow.emitted == []


async def test_orden_solicitada_v4_is_checked_as_orden_solicitada_is() -> None:
    inventory = Inventory()
    inventory.put("A", 5, EUR_2_50)
    event = orden_solicitada_v4(("A", 2))
    [answer] = (await _handle(inventory, event)).emitted
    assert answer.event_type == "StockVerificado" and answer.saga_id == event.saga_id
    assert answer.payload["total_amount"] == "5.00"
    assert inventory.checks[event.saga_id].result == "verified"
