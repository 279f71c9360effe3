"""POST /orders: the order, its saga row, the first audit entry and OrdenSolicitada, in one
statement, in the transaction that counted the customer's and the card's orders against the
limits of ``POST /orders`` (``pedidos.usecases.decline_velocity``) under their locks. The same
Idempotency-Key with the same body returns the first order, over the limits or not. A key is
the customer's: another customer's request under the same key places an order of its own.

The payment token is sealed for pagos before anything is written: the order and its event (and
so the outbox, the topics, inventario's StockVerificado and every dead letter and trace of them)
hold the sealed token only, which pagos alone can open (``saga_contracts.sealing``), and only
for this saga's charge: its saga and order ids, its customer (the one the bearer token names)
and its total in its currency. The total is what inventario asks pagos to charge in every
order it verifies: it refuses an order any of whose prices is not the catalog's, and charges
the catalog's prices (``inventario.domain.pricing``), which are then the order's."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pedidos.config import PedidosSettings
from pedidos.domain.order import SAGA_TYPE, OrderStatus, owner_of
from pedidos.usecases.decline_velocity import OrderRefused, hold_within_limits
from pedidos.usecases.fingerprints import Fingerprints
from pedidos.usecases.order_request_versions import in_versions
from pedidos.usecases.ports import AuditEntry, OrderStore, PaymentTokenSealer
from saga_contracts.events.orders import (
    OrdenSolicitada,
    OrderLine,
    PaymentMethod,
    ShippingAddress,
)
from saga_contracts.sealing import Binding
from sagakit.envelope import new_span_id
from sagakit.ids import time_ordered_id
from sagakit.observability import metrics, tracing
from sagakit.ports import UnitOfWorkPort
from sagakit.twins import emit_versions


class IdempotencyKeyReused(Exception):
    """The key was first used with another body."""


@dataclass(frozen=True)
class PlacedOrder:
    order_id: str
    saga_id: str
    status: str
    created: bool


def sealed(body: dict[str, Any], sealer: PaymentTokenSealer, charge: Binding
           ) -> dict[str, Any]:
    """``body`` with its payment token sealed for pagos, for ``charge`` only."""
    method = body["payment_method"]
    return {**body, "payment_method": {**method,
                                       "token": sealer.seal(method["token"], charge)}}


async def place_order(uow: UnitOfWorkPort, orders: OrderStore, body: dict[str, Any],
                      total: Decimal, idempotency_key: str | None, settings: PedidosSettings,
                      *, sealer: PaymentTokenSealer, fingerprints: Fingerprints,
                      request_span_id: str | None = None) -> PlacedOrder:
    """``body`` is the validated request in JSON form (money as two-decimal strings), its
    payment token in the clear; ``sealer`` seals it for pagos. Raises ``OrderRefused`` when its
    customer or its card is over a limit, and nothing is written.

    ``request_span_id`` is the span of the request that places the order, OrdenSolicitada's parent
    (docs/standard.md#saga-and-span-ids); without one the order is placed under a span of its own.
    The saga's row keeps it, with the trace context."""
    request_span_id = request_span_id or new_span_id()
    # Of the request as it came: the same request sent again has the same hash, while each
    # sealing of its token gives another ciphertext. Keyed, and of the token's fingerprint
    # rather than the token (pedidos.usecases.fingerprints).
    clear = body
    fingerprint = fingerprints.request(clear)
    card = fingerprints.card(body["payment_method"]["token"])
    # The saga id is random, as the standard asks (docs/standard.md#saga-and-span-ids); the order id
    # is a key only.
    order_id, saga_id = time_ordered_id(), uuid.uuid4()
    body = sealed(body, sealer, Binding.of(
        saga_id=str(saga_id), order_id=str(order_id), customer_id=body["customer_id"],
        amount=total, currency=body["currency"]))
    # Sealed before the customer's and the card's orders are held: they are held as briefly as
    # the count and the insert allow.
    try:
        await hold_within_limits(orders, body["customer_id"], card, settings)
    except OrderRefused:
        # A request sent again under its key (its answer lost) gets its order, which is one of
        # those that may be waiting: never a refusal for the order it placed.
        replayed = await _placed_before(orders, body["customer_id"], idempotency_key, clear,
                                        fingerprints)
        if replayed is None:
            raise
        return replayed
    orders.add(
        order_id=order_id, saga_id=saga_id, body=body, total=total,
        idempotency_key=idempotency_key, request_hash=fingerprint, card_fingerprint=card,
        context={"order_id": str(order_id), "total_amount": str(total),
                 "currency": body["currency"], "items": len(body["items"]),
                 "traceparent": tracing.current_traceparent(),
                 "request_span_id": request_span_id},
        step_timeout_s=settings.validation_timeout_s, saga_timeout_s=settings.saga_timeout_s,
        audit=AuditEntry("OrdenSolicitada", owner_of(body)))
    request = OrdenSolicitada(
        order_id=str(order_id),
        customer_id=body["customer_id"],
        items=tuple(OrderLine.model_validate(item) for item in body["items"]),
        total_amount=total,
        currency=body["currency"],
        shipping_address=ShippingAddress.model_validate(body["shipping_address"]),
        payment_method=PaymentMethod.model_validate(body["payment_method"]),
    )
    # In each version published (a breaking change's transition), in this commit.
    emit_versions(uow, in_versions(request, settings.orden_solicitada_versions),
                  saga_id=str(saga_id), parent_span_id=request_span_id,
                  metadata={"correlation_id": str(order_id), "user_id": body["customer_id"],
                            "channel": "api"})
    uow.after_commit(lambda: metrics.SAGAS_STARTED.labels(SAGA_TYPE).inc())
    if await uow.commit():
        return PlacedOrder(str(order_id), str(saga_id), OrderStatus.PENDIENTE_VALIDACION.value,
                           created=True)
    # The idempotency key was used before: nothing was written, that request's order stands.
    placed = await _placed_before(orders, body["customer_id"], idempotency_key, clear,
                                  fingerprints)
    assert placed is not None
    return placed


async def _placed_before(orders: OrderStore, customer_id: str, idempotency_key: str | None,
                         clear: dict[str, Any], fingerprints: Fingerprints) -> PlacedOrder | None:
    """The order the customer placed under this key, if any; ``IdempotencyKeyReused`` if it
    was placed by another request than ``clear``."""
    if idempotency_key is None:
        return None
    existing = await orders.by_idempotency_key(customer_id, idempotency_key)
    if existing is None:
        return None
    if not fingerprints.same_request(existing.request_hash, clear):
        raise IdempotencyKeyReused(idempotency_key)
    return PlacedOrder(existing.order_id, existing.saga_id, existing.status, created=False)
