"""HTTP helpers for the services and the gateway."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx

from saga_contracts.minor_units import from_minor_units
from saga_harness import config
from saga_harness.waiting import wait_for

TERMINAL = {"COMPLETADA", "CANCELADA_SIN_STOCK", "CANCELADA_PRECIO_RECHAZADO",
            "CANCELADA_PAGO_RECHAZADO",
            "CANCELADA_CON_REEMBOLSO", "CANCELADA_TIMEOUT", "CANCELADA_POR_USUARIO",
            "REEMBOLSO_FALLIDO", "TIMED_OUT"}


def new_sku(prefix: str = "SKU-TEST") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def order_body(items: list[tuple[str, int]], *, token: str | None = None, price: str = "5.00",
               customer: str | None = None) -> dict[str, Any]:
    """An order of ``items`` at ``price`` each. Without a ``customer``, a new one; without a
    ``token``, the customer's own card (the same for every order of the customer, so a body
    built again is the same body), as orders from the public mostly come: pedidos caps the
    orders one customer, or one card, may have waiting for their payment. The fake gateway
    approves any ``tok_…`` token but its few test cards."""
    customer = customer or f"cust-{uuid.uuid4().hex[:8]}"
    return {
        "customer_id": customer,
        "items": [{"sku": sku, "quantity": qty, "price": price} for sku, qty in items],
        "currency": "USD",
        "shipping_address": {"street": "Av. Siempre Viva 742", "city": "Lima", "country": "PE",
                             "postal_code": "15001"},
        "payment_method": {"type": "credit_card",
                           "token": token or f"tok_visa_{customer}"},
    }


@dataclass(frozen=True)
class Endpoints:
    """Where a stack's services answer, and the header its fake gateway's ledger wants: the
    local stack's by default, another's (the compose stack's) when given."""

    pedidos: str = config.PEDIDOS
    inventario: str = config.INVENTARIO
    pagos: str = config.PAGOS
    gateway: str = config.GATEWAY
    gateway_headers: Callable[[], dict[str, str]] = field(default=config.gateway_auth)


class Saga:
    """The stack as a customer, an operator and an auditor see it. Its client authenticates
    each request (``saga_harness.identity.StackAuth``): an order as the customer its body names,
    everything else as an operator."""

    def __init__(self, client: httpx.AsyncClient, at: Endpoints | None = None) -> None:
        self.http = client
        self.at = at or Endpoints()

    async def set_stock(self, sku: str, quantity: int, *, price: str | None = "5.00",
                        currency: str = "USD") -> None:
        """Sets the product's units and its catalog price (``order_body``'s default, which a
        test ordering at another price names here too); ``price=None`` leaves the price as it
        is (a new product then has none, and is not for sale)."""
        body: dict[str, Any] = {"quantity": quantity}
        if price is not None:
            body.update(price=price, currency=currency)
        r = await self.http.put(f"{self.at.inventario}/products/{sku}", json=body)
        r.raise_for_status()

    async def stock(self, sku: str) -> int:
        r = await self.http.get(f"{self.at.inventario}/products/{sku}")
        r.raise_for_status()
        return int(r.json()["quantity"])

    async def place(self, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": key} if key else {}
        r = await self.http.post(f"{self.at.pedidos}/orders", json=body, headers=headers)
        assert r.status_code == 202, r.text
        return r.json()

    async def order(self, order_id: str) -> dict[str, Any]:
        r = await self.http.get(f"{self.at.pedidos}/orders/{order_id}")
        r.raise_for_status()
        return r.json()

    async def history(self, saga_id: str) -> list[dict[str, Any]]:
        r = await self.http.get(f"{self.at.pedidos}/sagas/{saga_id}/history")
        r.raise_for_status()
        return r.json()["entries"]

    async def payments(self, saga_id: str) -> list[dict[str, Any]]:
        r = await self.http.get(f"{self.at.pagos}/payments", params={"saga_id": saga_id})
        r.raise_for_status()
        return r.json()

    async def ledger(self) -> dict[str, Any]:
        r = await self.http.get(f"{self.at.gateway}/ledger", headers=self.at.gateway_headers())
        r.raise_for_status()
        return r.json()

    async def lag(self, service: str) -> float:
        """Messages the service's consumer has not committed yet, from its /metrics."""
        base = {"pedidos": self.at.pedidos, "inventario": self.at.inventario,
                "pagos": self.at.pagos}[service]
        text = (await self.http.get(f"{base}/metrics")).text
        values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if line.startswith("kafka_consumer_lag{")]
        return sum(values) if values else float("inf")

    async def wait_caught_up(self, service: str, timeout: float = 30) -> None:
        """Until the service has consumed everything published so far (its lag gauge is 0)."""
        await wait_for(lambda: self.lag(service), lambda n: n == 0, timeout=timeout,
                       what=f"{service} caught up", interval=0.5)

    async def wait_status(self, order_id: str, accept: set[str] | str, timeout: float = 10
                          ) -> dict[str, Any]:
        wanted = {accept} if isinstance(accept, str) else accept
        return await wait_for(lambda: self.order(order_id), lambda o: o["status"] in wanted,
                              timeout=timeout, what=f"order {order_id} in {sorted(wanted)}")

    async def settled_order(self, stock: int, status: str) -> dict[str, Any]:
        """An order for one unit of a new product with ``stock`` units, once it is in
        ``status``: a real saga whose rows a test can then probe."""
        sku = new_sku()
        await self.set_stock(sku, stock)
        placed = await self.place(order_body([(sku, 1)]))
        await self.wait_status(placed["order_id"], status, timeout=30)
        return placed

    async def wait_terminal(self, order_id: str, timeout: float = 15) -> dict[str, Any]:
        return await self.wait_status(order_id, TERMINAL, timeout)

    async def money_of(self, saga_id: str) -> tuple[Decimal, int, int]:
        """Net charged (charges − refunds, in currency units), charges, refunds in the ledger."""
        ledger = await self.ledger()
        charges = [c for c in ledger["charges"]
                   if c["idempotency_key"] == f"charge-{saga_id}" and c["status"] == "succeeded"]
        ids = {c["id"] for c in charges}
        refunds = [r for r in ledger["refunds"] if r["charge"] in ids]
        net = sum(c["amount"] for c in charges) - sum(r["amount"] for r in refunds)
        currency = charges[0]["currency"] if charges else "usd"
        return from_minor_units(net, currency), len(charges), len(refunds)

    async def wait_no_net_charge(self, saga_id: str, timeout: float = 20) -> None:
        """Until the gateway's ledger shows no net charge for the saga and pagos has no work
        left for it (a CAPTURED payment is settled, yet its refund may still be on the way)."""
        async def net() -> Decimal:
            return (await self.money_of(saga_id))[0]
        await wait_for(net, lambda n: n == 0, timeout=timeout,
                       what=f"no net charge for saga {saga_id}")
        await self.wait_payment_settled(saga_id, timeout)

    async def wait_payment_settled(self, saga_id: str, timeout: float = 20) -> None:
        """Until pagos has no gateway work left for the saga (a refund may follow the order's
        terminal state)."""
        busy = {"CHARGING", "CANCEL_REQUESTED", "REFUNDING"}
        await wait_for(lambda: self.payments(saga_id),
                       lambda ps: all(p["status"] not in busy for p in ps),
                       timeout=timeout, what=f"payment of saga {saga_id} settled")
