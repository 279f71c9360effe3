"""OrdenSolicitada → StockVerificado | StockNoDisponible | PrecioRechazado(_v2). Reads without locks;
changes no stock; reserves it for the saga when the order's strategy says so. OrdenSolicitada_v4,
the same order with its address in lines, is checked alike.

Availability is the units on hand less the live reservations of other sagas, whatever the
strategy: a Check-Then-Pay order does not validate against units another saga holds. A verified
order reserves when any line's product is ``reserve_then_pay``, or ``auto`` and its in-flight
demand approaches its stock (``inventario.domain.allocation_strategy``). The reservation is
written with the check, guarded: the products locked at the commit must still have the units
(else nothing is written and the message is handled again, on what another saga reserved
meanwhile: StockNoDisponible), so units are held before pagos is asked to charge; an ``auto``
product's units are those left beside its Check-Then-Pay orders in flight. Its deadline is the
database clock at the read plus the TTL, and StockVerificado says which strategy ran and until
when the units are held: the saga's history shows it. An order with ``auto`` lines that does
not reserve is written under the ``auto`` products' lock too, only if the rule, asked again on
what is committed then, still says so (else it is handled again, and reserves): validations
that ran at once decide one after the other.

Stock first: an order short of units is StockNoDisponible whatever its prices. Then prices
(``inventario.domain.pricing``): an item whose product has no catalog price, or one in
another currency or at another price than the order's, refuses the order (PrecioRechazado, in
the versions inventario publishes: ``price_refusal_versions``) and nothing is charged. A
verified order asks pagos for its lines at their catalog prices, computed here: that is what
StockVerificado carries and pagos charges, never a figure of the order's own.

The check is recorded for the allocation to know, later, what the saga asked for: its lines,
and the payment a verified check asks pagos for (the amount in StockVerificado, which goes
out with the same commit: pagos charges only after it, so the record is there before any
genuine PagoExitoso). A saga that has an allocation already was cancelled before it was
checked: nothing is left to check.

A saga is checked once. Its OrdenSolicitada handled again (an operator's retry, a dead letter's
replay, a copy handled beside the original) is answered with the event its check recorded (a
price refusal in the versions published now), never with a second check's: stock restocked in
between must not turn a StockNoDisponible already on its way to pedidos into a StockVerificado
that pagos would charge. Two checks of one
saga at once: the first to commit keeps its record, the other writes nothing (the record's
guard), is handled again and answers as the first did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from inventario import metrics
from inventario.domain.allocation_strategy import AllocationStrategy, Demand, order_reserves
from inventario.domain.payment_match import Money
from inventario.domain.pricing import OrderedItem, amount_to_charge, refused_items
from inventario.domain.stock import Line, merge_lines, shortages
from inventario.metrics import ReservationOutcome
from inventario.usecases.event_parts import (
    priced_lines,
    refused_parts,
    shortage_parts,
    utc_timestamp,
)
from inventario.usecases.ports import RecordedCheck, StockStore, ValidationRead
from inventario.usecases.price_refusal_versions import REASONS, in_versions
from saga_contracts.events.base import Event
from saga_contracts.events.inventory import (
    PrecioRechazado,
    PrecioRechazado_v2,
    StockNoDisponible,
    StockVerificado,
)
from saga_contracts.events.orders import OrderRequest
from sagakit.message import Message
from sagakit.ports import UnitOfWorkPort
from sagakit.twins import emit_versions

log = logging.getLogger("inventario.validate_stock")


@dataclass(frozen=True)
class ReservationPolicy:
    """How long a reservation holds units, and the ``auto`` rule's ratio (InventarioSettings)."""

    ttl_s: float = 120.0
    auto_ratio: float = 0.5


@dataclass(frozen=True)
class ValidationPolicy:
    """How a stock check answers: its reservations, and the versions of PrecioRechazado it
    publishes, each in the same commit (InventarioSettings)."""

    reservation: ReservationPolicy = ReservationPolicy()
    price_refusal_versions: tuple[str, ...] = (PrecioRechazado_v2.event_type,
                                               PrecioRechazado.event_type)


async def validate_stock(uow: UnitOfWorkPort, stock: StockStore,
                         event: Message[OrderRequest],
                         validation: ValidationPolicy = ValidationPolicy()) -> None:
    policy = validation.reservation
    order = event.payload
    lines = merge_lines(Line(i.sku, i.quantity) for i in order.items)
    read = await stock.validation_read(event.saga_id, [line.sku for line in lines],
                                       in_flight_window_s=policy.ttl_s)
    if read.allocation is not None:
        # Cancelled before we validated it: nothing to check any more.
        log.info("order already cancelled, validation skipped",
                 extra={"saga_id": event.saga_id, "event_type": event.event_type})
        await uow.commit()
        return
    if read.check is not None:
        _answer_again(uow, event, read.check, validation.price_refusal_versions)
        await uow.commit()
        return
    available = read.available()
    reserving = _reserves(lines, read, available, policy)
    # A reservation leaves an ``auto`` product's Check-Then-Pay orders in flight their units.
    missing = shortages(lines, read.reservable() if reserving else available)
    refused = [] if missing else refused_items(
        (OrderedItem(i.sku, i.quantity, i.price) for i in order.items), order.currency,
        read.prices)
    answer: Event
    # Each version of a price refusal goes out with the commit; the first is recorded.
    versions: list[Event] = []
    if missing:
        answer = StockNoDisponible(order_id=order.order_id, reason="stock insuficiente",
                                   unavailable=shortage_parts(missing))
        stock.record_check(event.saga_id, order.order_id, lines, "unavailable",
                           payment_requested=None, answer=answer)
    elif refused:
        refusal = PrecioRechazado_v2(order_id=order.order_id,
                                     reason=REASONS[PrecioRechazado_v2.event_type],
                                     refused=refused_parts(refused, order.currency))
        versions = [*in_versions(refusal, validation.price_refusal_versions)]
        answer = versions[0]
        stock.record_check(event.saga_id, order.order_id, lines, "price_refused",
                           payment_requested=None, answer=answer)
    else:
        charged = Money(amount_to_charge(lines, read.prices), order.currency)
        verified = StockVerificado(order_id=order.order_id,
                                   items=priced_lines(lines, read.prices),
                                   total_amount=charged.amount, currency=charged.currency,
                                   payment_method=order.payment_method,
                                   allocation_strategy=AllocationStrategy.CHECK_THEN_PAY.value)
        if not reserving:
            answer = verified
            if _any_auto(lines, read):
                # Asked again under the products' lock: a burst validated at once sees itself.
                stock.record_auto_check(event.saga_id, order.order_id, lines, charged, answer,
                                        ratio=policy.auto_ratio,
                                        in_flight_window_s=policy.ttl_s)
            else:
                stock.record_check(event.saga_id, order.order_id, lines, "verified",
                                   payment_requested=charged, answer=answer)
        else:
            until = (read.now or datetime.now(UTC)) + timedelta(seconds=policy.ttl_s)
            # Built whole, validated: the deadline is left out, never null, when nothing is
            # held.
            answer = StockVerificado.model_validate({
                **verified.model_dump(exclude_none=True),
                "allocation_strategy": AllocationStrategy.RESERVE_THEN_PAY.value,
                "reserved_until": utc_timestamp(until)})
            stock.record_reserving_check(event.saga_id, order.order_id, lines, charged, answer,
                                         expires_at=until, in_flight_window_s=policy.ttl_s)
            uow.after_commit(_reserved(event, len(lines), until))
    emit_versions(uow, versions or [answer])
    # False (nothing written, the answer included) when a check of the saga committed
    # meanwhile: the consumer handles the message again and answers as that check did.
    await uow.commit()


def _reserved(event: Message[OrderRequest], products: int, until: datetime
              ) -> Callable[[], None]:
    """What follows a reservation's commit: counted (one per product) and logged."""
    def counted() -> None:
        metrics.RESERVATIONS.labels("inventario", ReservationOutcome.RESERVED).inc(products)
        log.info("stock reserved until %s", until.isoformat(),
                 extra={"saga_id": event.saga_id, "event_type": event.event_type})
    return counted


def _reserves(lines: list[Line], read: ValidationRead, available: dict[str, int],
              policy: ReservationPolicy) -> bool:
    demands = [Demand(line.sku, line.quantity, available.get(line.sku, 0),
                      read.in_flight.get(line.sku, 0)) for line in lines]
    return order_reserves(read.strategies, demands, policy.auto_ratio)


def _any_auto(lines: list[Line], read: ValidationRead) -> bool:
    return any(read.strategies.get(line.sku) is AllocationStrategy.AUTO for line in lines)


def _answer_again(uow: UnitOfWorkPort, event: Message[OrderRequest],
                  check: RecordedCheck, price_refusal_versions: Sequence[str]) -> None:
    """The saga was checked already: the same answer again, or none if it was not kept."""
    if check.answer is None:
        log.warning("order checked before answers were kept: not answered again (%s)",
                    check.result, extra={"saga_id": event.saga_id,
                                         "event_type": event.event_type})
        return
    log.info("order checked already: its answer sent again",
             extra={"saga_id": event.saga_id, "event_type": event.event_type})
    if isinstance(check.answer, PrecioRechazado | PrecioRechazado_v2):
        emit_versions(uow, in_versions(check.answer, price_refusal_versions))
    else:
        uow.emit(check.answer)
