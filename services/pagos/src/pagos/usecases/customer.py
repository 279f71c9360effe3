"""Whose payment it is: the customer a saga's events name, so that a customer reads only its
own payments (pagos' HTTP API).

No event pagos consumes carries the customer in its payload; its envelope does: ``metadata.user_id``
is the authenticated user who placed the order (docs/standard.md#saga-and-span-ids: pedidos sets it
to the customer the token names), and every participant carries it on to the events it emits
(``sagakit.event_builder``). An event without it leaves the payment without a customer: operators
alone see it.

The envelope is the word of whoever wrote the event (inventario, for StockVerificado), so the
customer is not taken on that word alone: pedidos sealed the payment token for the customer
the order was placed by (``saga_contracts.sealing.Binding``), and the charge opens the token
with the customer recorded here. A StockVerificado that names another customer makes a payment
whose token does not open: no gateway call, and the charge's failure clears the customer
(``pagos.usecases.charge_payment``), so that no customer sees a payment a forged event made.
"""

from __future__ import annotations

from typing import Any

from sagakit.message import Message


def customer_of(event: Message[Any]) -> str | None:
    customer = event.metadata.get("user_id")
    return customer if isinstance(customer, str) and customer else None
