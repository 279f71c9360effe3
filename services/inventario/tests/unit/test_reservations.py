"""reserve_then_pay with the use cases on the fakes: a validation that reserves holds the units
for its saga before pagos charges (a second validation for the same last units is
StockNoDisponible, and a Check-Then-Pay order does not validate against them either); the
payment's success confirms the reservation and takes the units; a payment after the deadline
takes the Check-Then-Pay path (allocated if the units are still there, else a refund: never an
oversell); a cancellation releases the reservation once; the expiry job marks the reservations
past their deadline once and sleeps until the next one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from inventario.domain.allocation_strategy import AllocationStrategy
from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line
from inventario.usecases.allocate_stock import allocate_stock
from inventario.usecases.expire_reservations import expire_reservations
from inventario.usecases.release_stock import release_stock
from inventario.usecases.validate_stock import (
    ReservationPolicy,
    ValidationPolicy,
    validate_stock,
)
from saga_harness.events import handling, orden_cancelada, orden_solicitada, pago_exitoso

from .fakes import (
    FakeReservationDeadlines,
    FakeStockRepository,
    Inventory,
    Reservation,
    StagingUnitOfWork,
    StockCheck,
)

EUR_2_50 = Money(Decimal("2.50"), "EUR")
POLICY = ValidationPolicy(ReservationPolicy(ttl_s=120.0, auto_ratio=0.5))
NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def _inventory(units: int, strategy: AllocationStrategy) -> Inventory:
    inventory = Inventory(frozen_clock=NOW)
    inventory.put("A", units, EUR_2_50)
    inventory.strategies["A"] = strategy
    return inventory


async def _validate(inventory: Inventory, saga_id: str, units: int, *,
                    meanwhile: Callable[[Inventory], None] | None = None
                    ) -> tuple[StagingUnitOfWork, str]:
    event = orden_solicitada(("A", units), saga_id=saga_id)
    uow = StagingUnitOfWork()
    with handling(event):
        await validate_stock(uow, FakeStockRepository(inventory, uow, meanwhile=meanwhile),
                             event, POLICY)
    return uow, event.payload.order_id


async def _pay(inventory: Inventory, saga_id: str, order_id: str, units: int
               ) -> StagingUnitOfWork:
    event = pago_exitoso(saga_id, order_id, amount=f"{Decimal('2.50') * units:.2f}")
    uow = StagingUnitOfWork()
    with handling(event):
        await allocate_stock(uow, FakeStockRepository(inventory, uow), event,
                             lock_timeout_ms=1000, statement_timeout_ms=2000)
    return uow


async def _cancel(inventory: Inventory, saga_id: str, order_id: str) -> StagingUnitOfWork:
    event = orden_cancelada(saga_id, order_id, reason="pago_rechazado", status="CANCELADA")
    uow = StagingUnitOfWork()
    with handling(event):
        await release_stock(uow, FakeStockRepository(inventory, uow), event)
    return uow


async def test_a_reserving_validation_holds_the_units_and_says_so_in_its_answer() -> None:
    inventory = _inventory(3, AllocationStrategy.RESERVE_THEN_PAY)
    uow, _ = await _validate(inventory, "saga-1", 2)

    assert uow.committed
    [event] = uow.emitted
    assert event.event_type == "StockVerificado"
    assert event.payload["allocation_strategy"] == "reserve_then_pay"
    assert event.payload["reserved_until"] == "2026-12-06T09:02:00.000000Z"
    assert inventory.reservations == {
        ("saga-1", "A"): Reservation(2, "RESERVED", NOW + timedelta(seconds=120))}
    assert inventory.products["A"] == 3  # held, not taken
    product = await FakeStockRepository(inventory, StagingUnitOfWork()).product("A")
    assert product is not None and (product.reserved, product.available) == (2, 1)


async def test_a_check_then_pay_validation_holds_nothing_and_says_which_strategy_ran() -> None:
    inventory = _inventory(3, AllocationStrategy.CHECK_THEN_PAY)
    uow, _ = await _validate(inventory, "saga-1", 2)

    [event] = uow.emitted
    assert event.payload["allocation_strategy"] == "check_then_pay"
    assert "reserved_until" not in event.payload
    assert inventory.reservations == {}


async def test_units_another_saga_holds_are_not_available_to_either_strategy() -> None:
    inventory = _inventory(3, AllocationStrategy.RESERVE_THEN_PAY)
    await _validate(inventory, "saga-1", 2)
    second, _ = await _validate(inventory, "saga-2", 2)
    inventory.strategies["A"] = AllocationStrategy.CHECK_THEN_PAY
    third, _ = await _validate(inventory, "saga-3", 2)

    for uow in (second, third):
        [event] = uow.emitted
        assert event.event_type == "StockNoDisponible"
        assert event.payload["unavailable"] == [{"sku": "A", "requested": 2, "available": 1}]
    assert set(inventory.reservations) == {("saga-1", "A")}


async def test_a_reservation_committed_between_the_read_and_the_commit_wins() -> None:
    """Both validations read 3 units; the other one commits its reservation first: this one's
    guard finds the locked units short, writes nothing, and handled again it answers
    StockNoDisponible."""
    inventory = _inventory(3, AllocationStrategy.RESERVE_THEN_PAY)
    event = orden_solicitada(("A", 2), saga_id="saga-2")
    uow = StagingUnitOfWork()

    def other_reserves(inv: Inventory) -> None:
        inv.reservations[("saga-1", "A")] = Reservation(2, "RESERVED", NOW + timedelta(60))

    with handling(event):
        await validate_stock(uow, FakeStockRepository(inventory, uow, meanwhile=other_reserves),
                             event, POLICY)
    assert not uow.committed and "saga-2" not in inventory.checks
    assert set(inventory.reservations) == {("saga-1", "A")}

    again = StagingUnitOfWork()
    with handling(event):
        await validate_stock(again, FakeStockRepository(inventory, again), event, POLICY)
    [answer] = again.emitted
    assert answer.event_type == "StockNoDisponible"


async def test_the_payment_confirms_a_live_reservation_and_takes_its_units() -> None:
    inventory = _inventory(2, AllocationStrategy.RESERVE_THEN_PAY)
    _, order_id = await _validate(inventory, "saga-1", 2)
    uow = await _pay(inventory, "saga-1", order_id, 2)

    [event] = uow.emitted
    assert event.event_type == "StockAsignado"
    assert inventory.products["A"] == 0
    assert inventory.allocations["saga-1"].status is AllocationStatus.ALLOCATED
    assert inventory.reservations[("saga-1", "A")].status == "CONFIRMED"


async def test_a_payment_after_the_deadline_allocates_the_units_still_there() -> None:
    inventory = _inventory(2, AllocationStrategy.RESERVE_THEN_PAY)
    _, order_id = await _validate(inventory, "saga-1", 2)
    inventory.frozen_clock = NOW + timedelta(seconds=121)  # expired, the job not run yet
    uow = await _pay(inventory, "saga-1", order_id, 2)

    [event] = uow.emitted
    assert event.event_type == "StockAsignado"
    assert inventory.products["A"] == 0
    # Its deadline passed, the job not run yet: the units it held are the ones taken, and the
    # row says so (the job then leaves it).
    assert inventory.reservations[("saga-1", "A")].status == "CONFIRMED"


async def test_a_payment_after_the_deadline_and_another_saga_reserving_is_refunded() -> None:
    """The reservation expired (and the job marked it), another saga reserved the units: the
    late payment takes the Check-Then-Pay path, finds them held, and fails: its refund follows,
    and nothing is oversold."""
    inventory = _inventory(2, AllocationStrategy.RESERVE_THEN_PAY)
    _, order_id = await _validate(inventory, "saga-1", 2)
    inventory.frozen_clock = NOW + timedelta(seconds=121)
    assert [r.saga_id for r in await FakeReservationDeadlines(inventory).expire_due(10)] == [
        "saga-1"]
    await _validate(inventory, "saga-2", 2)
    uow = await _pay(inventory, "saga-1", order_id, 2)

    [event] = uow.emitted
    assert event.event_type == "FalloAsignacion"
    assert inventory.products["A"] == 2
    assert inventory.allocations["saga-1"].status is AllocationStatus.FAILED
    assert inventory.reservations[("saga-2", "A")].status == "RESERVED"


async def test_a_cancellation_releases_the_reservation_once() -> None:
    inventory = _inventory(2, AllocationStrategy.RESERVE_THEN_PAY)
    _, order_id = await _validate(inventory, "saga-1", 2)
    first = await _cancel(inventory, "saga-1", order_id)
    second = await _cancel(inventory, "saga-1", order_id)

    assert first.committed and second.committed
    assert inventory.reservations[("saga-1", "A")].status == "RELEASED"
    assert inventory.allocations["saga-1"].status is AllocationStatus.BLOCKED
    assert first.emitted == [] and second.emitted == []  # nothing was allocated
    # Released: the units are available again, and a late payment allocates nothing.
    third, _ = await _validate(inventory, "saga-2", 2)
    assert [e.event_type for e in third.emitted] == ["StockVerificado"]
    late = await _pay(inventory, "saga-1", order_id, 2)
    assert late.emitted == [] and inventory.products["A"] == 2


async def test_a_cancellation_after_the_confirmation_puts_the_units_back() -> None:
    inventory = _inventory(2, AllocationStrategy.RESERVE_THEN_PAY)
    _, order_id = await _validate(inventory, "saga-1", 2)
    await _pay(inventory, "saga-1", order_id, 2)
    uow = await _cancel(inventory, "saga-1", order_id)

    assert [e.event_type for e in uow.emitted] == ["StockLiberado"]
    assert inventory.products["A"] == 2
    assert inventory.reservations[("saga-1", "A")].status == "CONFIRMED"


async def test_the_expiry_job_marks_what_is_due_once_and_sleeps_until_the_next() -> None:
    inventory = Inventory(frozen_clock=NOW)
    for saga, seconds in (("due-1", -5), ("due-2", 0), ("later", 30)):
        inventory.reservations[(saga, "A")] = Reservation(
            1, "RESERVED", NOW + timedelta(seconds=seconds))
    deadlines = FakeReservationDeadlines(inventory)

    wait = await expire_reservations(deadlines, interval_s=60.0, batch=1)
    assert {k[0]: r.status for k, r in inventory.reservations.items()} == {
        "due-1": "EXPIRED", "due-2": "EXPIRED", "later": "RESERVED"}
    assert 30.0 <= wait <= 30.1
    assert await deadlines.expire_due(10) == []  # each once
    assert await expire_reservations(deadlines, interval_s=5.0) == 5.0  # bounded
    inventory.reservations.clear()
    assert await expire_reservations(deadlines, interval_s=7.0) == 7.0


async def test_auto_reserves_once_the_demand_in_flight_approaches_the_stock() -> None:
    """``auto`` at ratio 0.5 on 10 units: the first order (2 units, none in flight) is
    Check-Then-Pay; with 3 more units verified and unallocated, a 2-unit order reaches half of
    the stock and reserves."""
    inventory = _inventory(10, AllocationStrategy.AUTO)
    first, _ = await _validate(inventory, "saga-1", 2)
    second, _ = await _validate(inventory, "saga-2", 1)
    third, _ = await _validate(inventory, "saga-3", 2)

    strategies = [uow.emitted[0].payload["allocation_strategy"]
                  for uow in (first, second, third)]
    assert strategies == ["check_then_pay", "check_then_pay", "reserve_then_pay"]
    assert set(inventory.reservations) == {("saga-3", "A")}


async def test_auto_asks_its_rule_again_under_the_lock_and_a_burst_it_missed_makes_it_reserve(
        ) -> None:
    """The read sees nothing in flight (Check-Then-Pay); four units of other orders are
    verified before its commit (validations that ran at once): asked again at the commit, the
    rule says reserve, nothing is written; handled again, the order reserves."""
    inventory = _inventory(10, AllocationStrategy.AUTO)

    def a_burst_verified(inv: Inventory) -> None:
        for n in range(4):
            inv.checks[f"other-{n}"] = StockCheck(f"order-{n}", [Line("A", 1)], "verified",
                                                  EUR_2_50, checked_at=inv.clock)
    missed, _ = await _validate(inventory, "saga-1", 1, meanwhile=a_burst_verified)
    assert not missed.committed and missed.emitted == []
    assert "saga-1" not in inventory.checks
    again, _ = await _validate(inventory, "saga-1", 1)
    assert again.committed
    assert again.emitted[0].payload["allocation_strategy"] == "reserve_then_pay"
    assert inventory.reservations[("saga-1", "A")].quantity == 1


async def test_auto_on_a_calm_product_checks_without_reserving() -> None:
    inventory = _inventory(100, AllocationStrategy.AUTO)
    uow = StagingUnitOfWork()
    event = orden_solicitada(("A", 2), saga_id="saga-1")
    stock = FakeStockRepository(inventory, uow)
    with handling(event):
        await validate_stock(uow, stock, event, POLICY)
    assert uow.committed and stock.auto_checks == 1
    assert uow.emitted[0].payload["allocation_strategy"] == "check_then_pay"
    assert inventory.reservations == {}


async def test_an_auto_reservation_leaves_the_check_then_pay_orders_in_flight_their_units(
        ) -> None:
    """Four units verified under Check-Then-Pay, in flight: of 10, a reservation may hold 6
    (the four are on their way to take theirs). Seven is StockNoDisponible, six reserves."""
    inventory = _inventory(10, AllocationStrategy.AUTO)
    for n in range(4):
        uow, _ = await _validate(inventory, f"plain-{n}", 1)
        assert uow.emitted[0].payload["allocation_strategy"] == "check_then_pay"
    refused, _ = await _validate(inventory, "greedy", 7)
    assert refused.committed
    [answer] = refused.emitted
    assert answer.event_type == "StockNoDisponible"
    assert answer.payload["unavailable"][0]["available"] == 6
    held, _ = await _validate(inventory, "fits", 6)
    assert held.emitted[0].payload["allocation_strategy"] == "reserve_then_pay"
    assert inventory.reservations[("fits", "A")].quantity == 6


async def test_an_order_reserves_if_any_of_its_products_does() -> None:
    inventory = Inventory(frozen_clock=NOW)
    inventory.put("A", 5, EUR_2_50)
    inventory.put("B", 5, EUR_2_50)
    inventory.strategies["B"] = AllocationStrategy.RESERVE_THEN_PAY
    event = orden_solicitada(("A", 1), ("B", 2), saga_id="saga-1")
    uow = StagingUnitOfWork()
    with handling(event):
        await validate_stock(uow, FakeStockRepository(inventory, uow), event, POLICY)

    assert uow.emitted[0].payload["allocation_strategy"] == "reserve_then_pay"
    assert {k: r.quantity for k, r in inventory.reservations.items()} == {
        ("saga-1", "A"): 1, ("saga-1", "B"): 2}
    assert [line for line in inventory.checks["saga-1"].lines] == [Line("A", 1), Line("B", 2)]
