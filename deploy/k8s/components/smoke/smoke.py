"""The post-install smoke test of a Kubernetes deployment (the saga-smoke Job): stocks a product,
places an order paid with ``tok_visa`` and waits for it to be COMPLETADA. Exits 0 when it is,
1 (naming the last status seen) when the order ends otherwise or the deadline passes.

    python smoke.py <pedidos URL> <inventario URL> [deadline seconds]

Standard library only: it runs in a service's image, whatever that image installs.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
import uuid
from typing import Any

TERMINAL_FAILURES = {"CANCELADA_SIN_STOCK", "CANCELADA_PAGO_RECHAZADO", "CANCELADA_CON_REEMBOLSO",
                     "CANCELADA_TIMEOUT", "TIMED_OUT"}


def call(method: str, url: str, body: dict[str, Any] | None = None,
         headers: dict[str, str] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "content-type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"{}")


def order(sku: str) -> dict[str, Any]:
    return {"customer_id": f"smoke-{uuid.uuid4().hex[:8]}",
            "items": [{"sku": sku, "quantity": 1, "price": "10.00"}], "currency": "USD",
            "shipping_address": {"street": "Smoke 1", "city": "Lima", "country": "PE",
                                 "postal_code": "15001"},
            "payment_method": {"type": "credit_card", "token": "tok_visa"}}


def main(argv: list[str]) -> int:
    pedidos, inventario = argv[0].rstrip("/"), argv[1].rstrip("/")
    deadline = time.monotonic() + (float(argv[2]) if len(argv) > 2 else 120.0)
    sku = f"SMOKE-{uuid.uuid4().hex[:8]}"
    call("PUT", f"{inventario}/products/{sku}", {"quantity": 1})
    placed = call("POST", f"{pedidos}/orders", order(sku), {"Idempotency-Key": sku})
    print(f"order {placed['order_id']} placed, saga {placed['saga_id']}", flush=True)
    status = placed["status"]
    while time.monotonic() < deadline:
        status = call("GET", f"{pedidos}/orders/{placed['order_id']}")["status"]
        if status == "COMPLETADA":
            print("COMPLETADA: the saga ran through pedidos, inventario, pagos and Kafka")
            return 0
        if status in TERMINAL_FAILURES:
            break
        time.sleep(0.5)  # a poll under a deadline: the saga's end is another service's doing
    print(f"the order ended {status}, not COMPLETADA", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
