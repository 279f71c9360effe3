"""The decline limits of ``POST /orders``: against card testing, an order is refused (429) while
its customer, or its card, has had too many payments declined lately.

Where the limit lives, and why here: orders are placed at pedidos, and only a refusal before
the order exists spares the gateway the charge that would test the next card; pagos learns the
declines, but by then the order is placed and the card tried, and it has no request to answer
``429`` to. pedidos learns every decline too, as a ``PagoRechazado``, and records it on its order
whatever became of the order (its customer may have cancelled it first), in its own database:
so the limit counts those declines there, per customer and per card (the token's keyed
fingerprint, ``pedidos.usecases.fingerprints``), and holds across every instance, which share
that database and keep nothing in memory.

A decline counts from when pagos told it, for ``PEDIDOS_DECLINE_WINDOW_S``; an
order is refused while ``PEDIDOS_DECLINES_PER_CUSTOMER`` of its customer's, or
``PEDIDOS_DECLINES_PER_CARD`` of its card's, are within the window, until the oldest of those
leaves it (``Retry-After``). Refused orders are not written, and so never count themselves.
"""

from __future__ import annotations

import math
from typing import Protocol

from pedidos.config import PedidosSettings


class RecentDeclines(Protocol):
    async def seconds_until_fewer(self, *, customer_id: str | None, card_fingerprint: str | None,
                                  limit: int, window_s: float) -> float | None:
        """None when fewer than ``limit`` declined orders of that customer (or card) are
        within the last ``window_s``; else how long until one fewer is."""
        ...


async def wait_before_order(declines: RecentDeclines, customer_id: str, card_fingerprint: str,
                            settings: PedidosSettings) -> int:
    """Whole seconds the customer must wait before this order is taken; 0 when it may go."""
    window = settings.decline_window_s
    waits = [await declines.seconds_until_fewer(customer_id=customer_id, card_fingerprint=None,
                                                limit=settings.declines_per_customer,
                                                window_s=window),
             await declines.seconds_until_fewer(customer_id=None,
                                                card_fingerprint=card_fingerprint,
                                                limit=settings.declines_per_card,
                                                window_s=window)]
    over = [w for w in waits if w is not None]
    # At least a second: the decline that leaves the window may leave it in a fraction of one.
    return max(1, math.ceil(max(over))) if over else 0
