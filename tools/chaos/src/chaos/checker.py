"""The saga's system-wide invariants, checked on a snapshot of the three schemas and the
gateway's ledger. ``check`` is pure: tests corrupt a snapshot to prove each rule bites."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

TERMINAL = {"COMPLETADA", "CANCELADA_SIN_STOCK", "CANCELADA_PRECIO_RECHAZADO",
            "CANCELADA_PAGO_RECHAZADO",
            "CANCELADA_CON_REEMBOLSO", "CANCELADA_TIMEOUT", "CANCELADA_POR_USUARIO",
            "REEMBOLSO_FALLIDO", "TIMED_OUT"}


@dataclass
class Order:
    order_id: str
    saga_id: str
    status: str
    total: Decimal
    items: list[dict[str, Any]]


@dataclass
class Snapshot:
    orders: dict[str, Order]                      # by order id
    acknowledged: list[str]                       # order ids answered 202 during the run
    initial_stock: dict[str, int]
    final_stock: dict[str, int]
    allocations: dict[str, tuple[str, list[dict[str, Any]]]]   # saga id → (status, items)
    charges: list[dict[str, Any]]                 # the gateway's ledger
    refunds: list[dict[str, Any]]
    stale_outbox: list[tuple[str, str, float]] = field(default_factory=list)  # svc, saga, age s
    inbox_without_effect: list[tuple[str, str]] = field(default_factory=list)  # svc, message id


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str
    sagas: tuple[str, ...] = ()

    def __str__(self) -> str:
        who = f" [{', '.join(self.sagas)}]" if self.sagas else ""
        return f"{self.invariant}: {self.detail}{who}"


def check(s: Snapshot) -> list[Violation]:
    return [*no_oversell(s), *money_balances(s), *every_saga_terminal(s), *outbox_drained(s),
            *inbox_matches_effects(s), *acknowledged_orders_exist(s)]


def no_oversell(s: Snapshot) -> list[Violation]:
    out = []
    by_saga = {o.saga_id: o for o in s.orders.values()}
    allocated: dict[str, int] = defaultdict(int)
    for saga_id, (status, items) in s.allocations.items():
        if status != "ALLOCATED":
            continue
        order = by_saga.get(saga_id)
        if order is None or order.status != "COMPLETADA":
            out.append(Violation("no_oversell", "stock allocated to an order that is not "
                                 f"COMPLETADA ({order.status if order else 'unknown'})",
                                 (saga_id,)))
        for item in items:
            allocated[item["sku"]] += int(item["quantity"])
    for o in s.orders.values():
        if o.status == "COMPLETADA" and s.allocations.get(o.saga_id, ("", []))[0] != "ALLOCATED":
            out.append(Violation("no_oversell", "COMPLETADA without an allocation",
                                 (o.saga_id,)))
    for sku, initial in s.initial_stock.items():
        final = s.final_stock.get(sku, 0)
        if final < 0:
            out.append(Violation("no_oversell", f"{sku} stock is negative ({final})"))
        if initial - final != allocated.get(sku, 0):
            out.append(Violation("no_oversell", f"{sku}: {initial} - {final} consumed but "
                                 f"{allocated.get(sku, 0)} allocated to completed orders"))
    return out


def money_balances(s: Snapshot) -> list[Violation]:
    out = []
    charges_by_saga: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in s.charges:
        key = c.get("idempotency_key") or ""
        if c["status"] == "succeeded" and key.startswith("charge-"):
            charges_by_saga[key.removeprefix("charge-")].append(c)
    refunded: dict[str, int] = defaultdict(int)
    for r in s.refunds:
        refunded[r["charge"]] += int(r["amount"])
    for saga_id, charges in charges_by_saga.items():
        if len(charges) > 1:
            out.append(Violation("money", f"{len(charges)} successful charges", (saga_id,)))
        for c in charges:
            if refunded[c["id"]] > int(c["amount"]):
                out.append(Violation("money", "refunds exceed the charge", (saga_id,)))
    for o in s.orders.values():
        charges = charges_by_saga.get(o.saga_id, [])
        net = sum(int(c["amount"]) - refunded[c["id"]] for c in charges)
        expected = int(o.total * 100) if o.status == "COMPLETADA" else 0
        if o.status == "REEMBOLSO_FALLIDO":
            continue  # flagged for a manual refund: the operators own the balance
        if net != expected:
            out.append(Violation("money", f"{o.status} order has a net charge of {net} minor "
                                 f"units, expected {expected}", (o.saga_id,)))
    return out


def every_saga_terminal(s: Snapshot) -> list[Violation]:
    return [Violation("terminal", f"still {o.status} after the faults stopped", (o.saga_id,))
            for o in s.orders.values() if o.status not in TERMINAL]


def outbox_drained(s: Snapshot) -> list[Violation]:
    return [Violation("outbox", f"{svc} outbox row unpublished for {age:.0f}s", (saga,))
            for svc, saga, age in s.stale_outbox]


def inbox_matches_effects(s: Snapshot) -> list[Violation]:
    return [Violation("inbox", f"{svc} recorded message {mid} as processed with no effect")
            for svc, mid in s.inbox_without_effect]


def acknowledged_orders_exist(s: Snapshot) -> list[Violation]:
    return [Violation("acknowledged", f"order {oid} was answered 202 and does not exist")
            for oid in s.acknowledged if oid not in s.orders]
