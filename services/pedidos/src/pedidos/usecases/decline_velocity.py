"""The limits of ``POST /orders`` against card testing: an order is refused (429) while its
customer, or its card, has had too many payments declined lately, or has too many orders
waiting for their payment.

Where the limits live, and why here: orders are placed at pedidos, and only a refusal before
the order exists spares the gateway the charge that would test the next card; pagos learns the
declines, but by then the order is placed and the card tried, and it has no request to answer
``429`` to. pedidos learns every decline too, as a ``PagoRechazado``, and records it on its order
whatever became of the order (its customer may have cancelled it first), in its own database:
so the limits count those declines there, per customer and per card (the token's keyed
fingerprint, ``pedidos.usecases.fingerprints``), and hold across every instance, which share
that database and keep nothing in memory.

A decline counts from when pagos told it, for ``PEDIDOS_DECLINE_WINDOW_S``. But it is known only
then, once its order was taken and its card tried: orders sent at once would all be taken
before any of their declines is heard. So an order still waiting for its payment (placed, its
payment not decided: ``PENDIENTE_VALIDACION``, ``PENDIENTE_PAGO``) counts as a decline to come.
An order is refused while its customer's declines within the window and its waiting orders
together reach ``PEDIDOS_DECLINES_PER_CUSTOMER``, or its card's reach
``PEDIDOS_DECLINES_PER_CARD``; and while its customer has ``PEDIDOS_WAITING_ORDERS_PER_CUSTOMER``
orders waiting, or its card ``PEDIDOS_WAITING_ORDERS_PER_CARD``, whatever their declines.

They are counted, and the order added, in one transaction that holds the customer's orders and
the card's (``OrderStore.hold_orders_of``): two orders of one customer, or of one card, are
counted one after the other, in whichever instances they arrive, and the second counts the
first. Refused orders are not written, and so never count themselves.

The answer: with the declines alone at a limit, ``too many declined payments lately`` and
``Retry-After`` when the oldest of them leaves the window; else ``too many orders waiting for
their payment``, naming the limits, and ``Retry-After`` a second, about what a payment takes to
be decided. It never says whether the customer or the card was refused: that would tell a card
tester whether the card or the account is burnt.
"""

from __future__ import annotations

import math

from pedidos.config import PedidosSettings
from pedidos.usecases.ports import OrderStore, Standing

TOO_MANY_DECLINES = "too many declined payments lately: try again after Retry-After seconds"
WAITING_RETRY_AFTER_S = 1


class OrderRefused(Exception):
    """The order is over a limit: nothing was written. ``retry_after_s``: whole seconds, at
    least 1."""

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after_s = retry_after_s


def too_many_waiting(settings: PedidosSettings) -> str:
    return (f"too many orders waiting for their payment: at most "
            f"{settings.waiting_orders_per_customer} of a customer and "
            f"{settings.waiting_orders_per_card} of a card wait at once, fewer after declined "
            f"payments; try again after Retry-After seconds")


def refusal(customer: Standing, card: Standing, settings: PedidosSettings
            ) -> OrderRefused | None:
    """Why an order of a customer and a card that stand so is refused; None when it may go."""
    limits = ((customer, settings.declines_per_customer, settings.waiting_orders_per_customer),
              (card, settings.declines_per_card, settings.waiting_orders_per_card))
    full = [s.full_for_s or 0.0 for s, declines, _ in limits if s.declines >= declines]
    if full:
        # At least a second: the decline that leaves the window may leave it in a fraction of
        # one.
        return OrderRefused(TOO_MANY_DECLINES, max(1, math.ceil(max(full))))
    if any(s.waiting >= waiting or s.declines + s.waiting >= declines
           for s, declines, waiting in limits):
        return OrderRefused(too_many_waiting(settings), WAITING_RETRY_AFTER_S)
    return None


async def hold_within_limits(orders: OrderStore, customer_id: str, card_fingerprint: str,
                             settings: PedidosSettings) -> None:
    """Holds the customer's and the card's orders until the unit of work ends, and raises
    ``OrderRefused`` if one more would be over a limit: the order added on this unit of work,
    if it commits, is counted by every order after it."""
    await orders.hold_orders_of(customer_id, card_fingerprint)
    customer, card = await orders.standing(
        customer_id=customer_id, card_fingerprint=card_fingerprint,
        window_s=settings.decline_window_s,
        customer_declines=settings.declines_per_customer,
        card_declines=settings.declines_per_card,
        # Far enough for both limits the waiting orders count under.
        customer_waiting=max(settings.waiting_orders_per_customer,
                             settings.declines_per_customer),
        card_waiting=max(settings.waiting_orders_per_card, settings.declines_per_card))
    refused = refusal(customer, card, settings)
    if refused is not None:
        raise refused
