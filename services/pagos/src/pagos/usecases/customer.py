"""Whose payment it is: the customer a saga's events name, so that a customer reads only its
own payments (pagos' HTTP API).

No event pagos consumes carries the customer in its payload; its envelope does:
``metadata.user_id`` is the authenticated user who placed the order (Part I §7.1: pedidos sets
it to the customer the token names), and every participant carries it on to the events it
emits (``sagakit.event_builder``). An event without it (published before the API took tokens)
leaves the payment without a customer: operators alone see it.
"""

from __future__ import annotations

from typing import Any

from sagakit.message import Message


def customer_of(event: Message[Any]) -> str | None:
    customer = event.metadata.get("user_id")
    return customer if isinstance(customer, str) and customer else None
