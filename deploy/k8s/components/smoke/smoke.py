"""The post-install smoke test of a Kubernetes deployment (the saga-smoke Job): as an operator,
stocks a product at a catalog price; as a customer, places an order for it paid with
``tok_visa`` and waits for it to be COMPLETADA. Exits 0 when it is, 1 (naming the last status
seen) when the order ends otherwise or the deadline passes.

    python smoke.py <pedidos URL> <inventario URL> [deadline seconds]
                    (--identity-provider URL | --tokens DIR)

The services take bearer tokens only. ``--identity-provider`` asks the local identity provider
(a development stand-in, components/identity-provider) for an operator's and a new customer's;
``--tokens`` reads them from ``DIR/operator`` and ``DIR/customer`` (the Secret
saga-smoke-tokens, made from the cluster's real issuer: docs/deploy.md). The order's customer
is the customer token's subject.

Standard library only: it runs in a service's image, whatever that image installs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TERMINAL_FAILURES = {"CANCELADA_SIN_STOCK", "CANCELADA_PAGO_RECHAZADO", "CANCELADA_CON_REEMBOLSO",
                     "CANCELADA_TIMEOUT", "TIMED_OUT"}
# The catalog price the product is given and the order pays: an order at another price than
# the catalog's is cancelled without a charge.
PRICE, CURRENCY = "10.00", "USD"


@dataclass(frozen=True)
class Tokens:
    operator: str
    customer: str


def call(method: str, url: str, body: dict[str, Any] | None = None,
         headers: dict[str, str] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "content-type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"{}")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def tokens_from_provider(url: str) -> Tokens:
    def token(sub: str, role: str) -> str:
        return str(call("POST", f"{url.rstrip('/')}/token",
                        {"sub": sub, "roles": [role], "expires_in": 3600})["access_token"])
    return Tokens(operator=token("saga-smoke", "operator"),
                  customer=token(f"smoke-{uuid.uuid4().hex[:8]}", "customer"))


def tokens_from_files(folder: Path) -> Tokens:
    try:
        return Tokens(operator=(folder / "operator").read_text().strip(),
                      customer=(folder / "customer").read_text().strip())
    except OSError as exc:
        raise SystemExit(f"no tokens in {folder} ({exc.strerror}): make the Secret "
                         "saga-smoke-tokens (docs/deploy.md)") from None


def order(sku: str) -> dict[str, Any]:
    # No customer_id: pedidos takes the customer token's subject.
    return {"items": [{"sku": sku, "quantity": 1, "price": PRICE}], "currency": CURRENCY,
            "shipping_address": {"street": "Smoke 1", "city": "Lima", "country": "PE",
                                 "postal_code": "15001"},
            "payment_method": {"type": "credit_card", "token": "tok_visa"}}


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="smoke.py")
    parser.add_argument("pedidos")
    parser.add_argument("inventario")
    parser.add_argument("deadline", nargs="?", type=float, default=120.0)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--identity-provider", help="the local identity provider's URL")
    source.add_argument("--tokens", type=Path, help="a folder with `operator` and `customer`")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = arguments(argv)
    pedidos, inventario = args.pedidos.rstrip("/"), args.inventario.rstrip("/")
    deadline = time.monotonic() + args.deadline
    tokens = (tokens_from_provider(args.identity_provider) if args.identity_provider
              else tokens_from_files(args.tokens))
    sku = f"SMOKE-{uuid.uuid4().hex[:8]}"
    call("PUT", f"{inventario}/products/{sku}",
         {"quantity": 1, "price": PRICE, "currency": CURRENCY}, bearer(tokens.operator))
    placed = call("POST", f"{pedidos}/orders", order(sku),
                  {"Idempotency-Key": sku, **bearer(tokens.customer)})
    print(f"order {placed['order_id']} placed, saga {placed['saga_id']}", flush=True)
    status = placed["status"]
    while time.monotonic() < deadline:
        status = call("GET", f"{pedidos}/orders/{placed['order_id']}",
                      headers=bearer(tokens.customer))["status"]
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
