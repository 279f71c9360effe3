"""allocate_stock: PagoExitoso → StockAsignado | FalloAsignacion, decided on a read without locks
and written only if the commit's guard finds the units and the saga as they were read; else
nothing is written and the message is handled again on what is there then. A payment the
saga's stock check did not ask for takes nothing and is counted for the alert."""

from __future__ import annotations

import logging
from collections.abc import Callable
from decimal import Decimal

import pytest

from inventario import metrics as inventario_metrics
from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line
from inventario.usecases.allocate_stock import allocate_stock
from saga_harness.events import PAYMENT_METHOD, handling, pago_exitoso

from .fakes import Allocation, FakeStockRepository, Inventory, StagingUnitOfWork, StockCheck

ORDER_ID = "6f1c2a4e-1111-4222-8333-444455556666"
LOCK_TIMEOUT_MS = 1234
STATEMENT_TIMEOUT_MS = 5678


# What the stock check of every saga here asked pagos for, and what pago_exitoso pays.
REQUESTED = Money(Decimal("12.50"), "EUR")


def _checked(inventory: Inventory, saga_id: str, *lines: Line) -> None:
    inventory.checks[saga_id] = StockCheck(ORDER_ID, list(lines), "verified", REQUESTED)


def _mismatches(reason: str) -> float:
    return inventario_metrics.PAYMENT_MISMATCHES.labels("inventario", reason)._value.get()


async def _allocate(inventory: Inventory, saga_id: str, *,
                    meanwhile: Callable[[Inventory], None] | None = None,
                    amount: str = "12.50", currency: str = "EUR"
                    ) -> tuple[StagingUnitOfWork, FakeStockRepository]:
    event = pago_exitoso(saga_id, ORDER_ID, amount=amount, currency=currency)
    uow = StagingUnitOfWork()
    stock = FakeStockRepository(inventory, uow, meanwhile=meanwhile)
    with handling(event):
        await allocate_stock(uow, stock, event, lock_timeout_ms=LOCK_TIMEOUT_MS,
                             statement_timeout_ms=STATEMENT_TIMEOUT_MS)
    return uow, stock


async def test_the_checked_lines_units_are_taken_and_the_allocation_recorded() -> None:
    inventory = Inventory()
    inventory.put("A", 10)
    inventory.put("B", 5)
    _checked(inventory, "saga-1", Line("A", 3), Line("B", 5))
    uow, stock = await _allocate(inventory, "saga-1")

    assert uow.commits == 1 and uow.committed
    [event] = uow.emitted
    assert event.event_type == "StockAsignado" and event.saga_id == "saga-1"
    assert event.payload == {"order_id": ORDER_ID, "items": [{"sku": "A", "quantity": 3},
                                                             {"sku": "B", "quantity": 5}]}
    assert inventory.products == {"A": 7, "B": 0}
    assert inventory.allocations == {"saga-1": Allocation(
        ORDER_ID, AllocationStatus.ALLOCATED, [Line("A", 3), Line("B", 5)])}
    assert stock.lock_timeouts_ms == [LOCK_TIMEOUT_MS]
    assert stock.statement_timeouts_ms == [STATEMENT_TIMEOUT_MS], \
        "set by the read, for the allocation's commit statement"


async def test_stock_consumed_since_the_check_fails_the_allocation_and_takes_nothing() -> None:
    inventory = Inventory()
    inventory.put("A", 2)
    _checked(inventory, "saga-1", Line("A", 3), Line("Z", 1))
    uow, _ = await _allocate(inventory, "saga-1")

    assert uow.committed
    assert uow.emitted_types == ["FalloAsignacion"]
    assert uow.emitted[0].payload == {
        "order_id": ORDER_ID, "reason": "race condition: stock consumed after validation",
        "unavailable": [{"sku": "A", "requested": 3, "available": 2},
                        {"sku": "Z", "requested": 1, "available": 0}]}
    assert inventory.products == {"A": 2}
    assert inventory.allocations["saga-1"] == Allocation(
        ORDER_ID, AllocationStatus.FAILED, [Line("A", 3), Line("Z", 1)])


@pytest.mark.parametrize("status", list(AllocationStatus))
async def test_a_saga_with_an_allocation_already_is_left_alone(status: AllocationStatus) -> None:
    """A PagoExitoso delivered again, or one that comes after the order was cancelled."""
    inventory = Inventory()
    inventory.put("A", 5)
    _checked(inventory, "saga-1", Line("A", 1))
    before = Allocation(ORDER_ID, status, [Line("A", 1)])
    inventory.allocations["saga-1"] = before
    uow, stock = await _allocate(inventory, "saga-1")

    assert uow.commits == 1 and uow.committed  # the message is recorded as processed
    assert uow.emitted == [] and uow.staged is None
    assert inventory.products == {"A": 5} and inventory.allocations == {"saga-1": before}
    assert stock.lock_timeouts_ms == []


@pytest.mark.parametrize(("amount", "currency", "reason"), [
    ("12.49", "EUR", "amount_mismatch"),
    ("125.00", "EUR", "amount_mismatch"),
    ("12.50", "USD", "currency_mismatch"),
    ("99.00", "USD", "currency_mismatch"),
])
async def test_a_payment_other_than_the_one_requested_takes_nothing_and_is_counted(
        amount: str, currency: str, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    inventory = Inventory()
    inventory.put("A", 5)
    _checked(inventory, "saga-1", Line("A", 2))
    before = _mismatches(reason)
    with caplog.at_level(logging.WARNING, logger="inventario.allocate_stock"):
        uow, stock = await _allocate(inventory, "saga-1", amount=amount, currency=currency)

    assert uow.commits == 1 and uow.committed  # the message is recorded as processed
    assert uow.emitted == [] and uow.staged is None and stock.lock_timeouts_ms == []
    assert inventory.products == {"A": 5} and inventory.allocations == {}
    assert _mismatches(reason) == before + 1
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage() == (f"payment event ignored: {reason} "
                                    f"(paid {amount} {currency}, requested 12.50 EUR)")
    assert warning.saga_id == "saga-1" and warning.reason == reason  # type: ignore[attr-defined]
    assert PAYMENT_METHOD["token"] not in caplog.text


async def test_a_payment_for_a_saga_never_checked_takes_nothing_and_is_counted() -> None:
    inventory = Inventory()
    inventory.put("A", 5)
    before = _mismatches("no_payment_requested")
    uow, _ = await _allocate(inventory, "saga-1")

    assert uow.committed and uow.emitted == [] and uow.staged is None
    assert inventory.products == {"A": 5} and inventory.allocations == {}
    assert _mismatches("no_payment_requested") == before + 1


async def test_a_payment_for_a_saga_whose_stock_was_unavailable_takes_nothing() -> None:
    """Its check asked pagos for nothing (StockNoDisponible): whatever the event pays, it is not
    the saga's payment, even if the stock came back since."""
    inventory = Inventory()
    inventory.put("A", 5)
    inventory.checks["saga-1"] = StockCheck(ORDER_ID, [Line("A", 2)], "unavailable", None)
    before = _mismatches("no_payment_requested")
    uow, _ = await _allocate(inventory, "saga-1")

    assert uow.committed and uow.emitted == [] and uow.staged is None
    assert inventory.products == {"A": 5} and inventory.allocations == {}
    assert _mismatches("no_payment_requested") == before + 1


@pytest.mark.parametrize("status", list(AllocationStatus))
async def test_a_mismatched_payment_is_counted_whatever_the_saga_allocated(
        status: AllocationStatus) -> None:
    inventory = Inventory()
    inventory.put("A", 5)
    _checked(inventory, "saga-1", Line("A", 1))
    allocation = Allocation(ORDER_ID, status, [Line("A", 1)])
    inventory.allocations["saga-1"] = allocation
    before = _mismatches("amount_mismatch")
    uow, _ = await _allocate(inventory, "saga-1", amount="1.00")

    assert uow.committed and uow.emitted == []
    assert inventory.products == {"A": 5} and inventory.allocations == {"saga-1": allocation}
    assert _mismatches("amount_mismatch") == before + 1


async def test_the_requested_payment_counts_no_mismatch() -> None:
    inventory = Inventory()
    inventory.put("A", 5)
    _checked(inventory, "saga-1", Line("A", 1))
    before = {reason: _mismatches(reason) for reason in
              ("amount_mismatch", "currency_mismatch", "no_payment_requested")}
    uow, _ = await _allocate(inventory, "saga-1")

    assert uow.emitted_types == ["StockAsignado"]
    assert {reason: _mismatches(reason) for reason in before} == before


async def test_a_mismatch_is_counted_only_once_its_message_is_recorded() -> None:
    """Counted after the commit: a unit of work that ends without writing counts nothing
    (the message comes again, and is counted then)."""
    inventory = Inventory()
    event = pago_exitoso("saga-1", ORDER_ID)
    uow = StagingUnitOfWork(commit_result=False)
    before = _mismatches("no_payment_requested")
    with handling(event):
        await allocate_stock(uow, FakeStockRepository(inventory, uow), event,
                             lock_timeout_ms=LOCK_TIMEOUT_MS,
                             statement_timeout_ms=STATEMENT_TIMEOUT_MS)
    assert not uow.committed
    assert _mismatches("no_payment_requested") == before


async def test_units_taken_between_the_read_and_the_lock_write_nothing_then_fail_it() -> None:
    """Another saga takes the last unit after the read: the guard finds the units disagree
    with ALLOCATED, nothing is written, and handled again the payment fails the allocation."""
    inventory = Inventory()
    inventory.put("A", 1)
    _checked(inventory, "saga-1", Line("A", 1))

    def another_saga_takes_it(inv: Inventory) -> None:
        inv.put("A", 0)
    uow, _ = await _allocate(inventory, "saga-1", meanwhile=another_saga_takes_it)

    assert uow.commits == 1 and not uow.committed
    assert uow.emitted == []
    assert inventory.allocations == {} and inventory.products == {"A": 0}

    again, _ = await _allocate(inventory, "saga-1")
    assert again.committed and again.emitted_types == ["FalloAsignacion"]
    assert inventory.allocations["saga-1"].status is AllocationStatus.FAILED


async def test_units_put_back_between_the_read_and_the_lock_write_nothing_then_allocate() -> None:
    """Decided FAILED on too few units; a release puts them back before the lock: the guard
    finds the units disagree with FAILED, and handled again the payment allocates."""
    inventory = Inventory()
    inventory.put("A", 0)
    _checked(inventory, "saga-1", Line("A", 2))

    def another_saga_releases(inv: Inventory) -> None:
        inv.put("A", 2)
    uow, _ = await _allocate(inventory, "saga-1", meanwhile=another_saga_releases)

    assert not uow.committed and uow.emitted == []
    assert inventory.allocations == {} and inventory.products == {"A": 2}

    again, _ = await _allocate(inventory, "saga-1")
    assert again.committed and again.emitted_types == ["StockAsignado"]
    assert inventory.products == {"A": 0}


async def test_a_cancellation_recorded_between_the_read_and_the_lock_wins() -> None:
    """OrdenCancelada blocks the saga after the read: the guard finds its allocation, nothing
    is taken, and handled again the payment is left alone."""
    inventory = Inventory()
    inventory.put("A", 3)
    _checked(inventory, "saga-1", Line("A", 1))
    blocked = Allocation(ORDER_ID, AllocationStatus.BLOCKED, [])

    def cancelled(inv: Inventory) -> None:
        inv.allocations["saga-1"] = blocked
    uow, _ = await _allocate(inventory, "saga-1", meanwhile=cancelled)

    assert not uow.committed and uow.emitted == []
    assert inventory.products == {"A": 3} and inventory.allocations == {"saga-1": blocked}

    again, _ = await _allocate(inventory, "saga-1")
    assert again.committed and again.emitted == []
    assert inventory.products == {"A": 3}
