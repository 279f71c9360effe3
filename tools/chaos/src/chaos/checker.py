"""The saga's system-wide invariants, checked on a snapshot of the three schemas and the
gateway's ledger. ``check`` is pure: tests corrupt a snapshot to prove each rule bites."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
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
class Payment:
    """pagos' record of a saga's payment."""

    status: str
    charge_id: str | None
    manual_refund_required: bool
    attempts: list[dict[str, Any]]                # its attempt log: every gateway call recorded


@dataclass(frozen=True)
class Reservation:
    """A unit hold of reserve_then_pay (inventario's reservations table): one saga, one sku."""

    saga_id: str
    sku: str
    quantity: int
    status: str                                   # RESERVED | CONFIRMED | RELEASED | EXPIRED
    expires_at: datetime


@dataclass
class Reservations:
    """What the reservation invariants read. ``checked`` is False on a stack without the
    reservations table: every product is Check-Then-Pay there, and the invariants hold
    vacuously."""

    checked: bool = False
    rows: list[Reservation] = field(default_factory=list)
    at: datetime | None = None                    # the database's clock when they were read
    payment_taken_at: dict[str, datetime] = field(default_factory=dict)
    """Saga id → when inventario took its PagoExitoso (the database clock of the transaction
    that recorded the allocation, the one that judged whether the reservation was live)."""
    payment_deadline: dict[str, datetime] = field(default_factory=dict)
    """Saga id → when its payment step fell due, as pedidos' history recorded it for a saga
    whose units inventario reserved (absent: not recorded)."""
    cancellation_taken_at: dict[str, datetime] = field(default_factory=dict)
    """Saga id → when inventario took its OrdenCancelada (the database clock of the
    transaction that blocked or released it)."""


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
    payments: dict[str, Payment] = field(default_factory=dict)  # saga id → pagos' payment
    garbled: list[str] = field(default_factory=list)
    """Idempotency keys of the gateway calls the TCP proxy answered in the gateway's place (a
    key once per call: netproxy's reply faults)."""
    reservations: Reservations = field(default_factory=Reservations)


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str
    sagas: tuple[str, ...] = ()

    def __str__(self) -> str:
        who = f" [{', '.join(self.sagas)}]" if self.sagas else ""
        return f"{self.invariant}: {self.detail}{who}"


def check(s: Snapshot) -> list[Violation]:
    return [*no_oversell(s), *money_balances(s), *payments_match_ledger(s),
            *every_saga_terminal(s), *outbox_drained(s), *inbox_matches_effects(s),
            *acknowledged_orders_exist(s), *gateway_calls_recorded(s),
            *reservations_within_stock(s), *confirmed_reservations_allocated(s),
            *no_race_lost_while_reserved(s), *reservations_confirmed_when_taken(s),
            *reservations_end_with_their_saga(s)]


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
    charges_by_saga, refunded = _ledger_of(s)
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


def _ledger_of(s: Snapshot) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """The ledger's successful charges by saga id, and what was refunded of each charge."""
    charges: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in s.charges:
        key = c.get("idempotency_key") or ""
        if c["status"] == "succeeded" and key.startswith("charge-"):
            charges[key.removeprefix("charge-")].append(c)
    refunded: dict[str, int] = defaultdict(int)
    for r in s.refunds:
        refunded[r["charge"]] += int(r["amount"])
    return charges, refunded


# pagos' statuses once its work on a payment is over, and whether the money stays charged.
_KEEPS_THE_CHARGE = {"CAPTURED": True, "REFUNDED": False, "DECLINED": False, "CANCELLED": False,
                     "CHARGE_FAILED": False}


def payments_match_ledger(s: Snapshot) -> list[Violation]:
    """pagos' own record agrees with the gateway's ledger: a captured payment is the one charge
    the ledger keeps for its saga, under the charge id pagos recorded; a payment pagos holds no
    money for (refunded, declined, cancelled, failed) has nothing kept in the ledger. A
    payment left for a manual refund is the operators' to settle."""
    out = []
    charges, refunded = _ledger_of(s)
    for saga_id, p in s.payments.items():
        if p.status == "REFUND_FAILED":
            continue
        if p.status not in _KEEPS_THE_CHARGE:
            out.append(Violation("payments", f"payment still {p.status} after the faults "
                                 "stopped", (saga_id,)))
            continue
        kept = [c for c in charges.get(saga_id, []) if refunded[c["id"]] < int(c["amount"])]
        if not _KEEPS_THE_CHARGE[p.status]:
            if kept:
                out.append(Violation("payments", f"pagos says {p.status} but the gateway keeps "
                                     f"charge {kept[0]['id']}", (saga_id,)))
        elif [c["id"] for c in kept] != [p.charge_id]:
            out.append(Violation("payments", f"pagos says CAPTURED as {p.charge_id} but the "
                                 f"gateway keeps {[c['id'] for c in kept]}", (saga_id,)))
    return out


def no_manual_refund(s: Snapshot) -> list[Violation]:
    """No payment left for finance to refund by hand: for runs in which the gateway always came
    back and answered, so that every outcome could be found out."""
    flagged = {saga for saga, p in s.payments.items()
               if p.manual_refund_required or p.status == "REFUND_FAILED"}
    flagged |= {o.saga_id for o in s.orders.values() if o.status == "REEMBOLSO_FALLIDO"}
    return [Violation("manual_refund", "left for a refund by hand though the gateway came back",
                      (saga,)) for saga in sorted(flagged)]


# The gateway calls by their idempotency key's prefix: the kinds of attempt pagos' log records
# them as, and what the log says of a call that was understood. A charge's replays, sent to
# find out whether a cancelled charge was made, carry the charge's key and are logged as
# "resolve" attempts (pagos.usecases.charge_payment).
_CALLS = {"charge": ({"charge", "resolve"}, {"approved", "declined"}),
          "refund": ({"refund"}, {"refunded"})}


def gateway_calls_recorded(s: Snapshot) -> list[Violation]:
    """Every gateway call answered with something that is not the gateway's API (the TCP proxy's
    reply faults) is in its payment's attempt log as a call whose outcome was not understood:
    counted against the payment's budget, never a silent retry."""
    garbled: dict[tuple[str, str], int] = defaultdict(int)
    for key in s.garbled:
        call, _, saga_id = key.partition("-")
        if call in _CALLS and saga_id in s.payments:
            garbled[(saga_id, call)] += 1
    out = []
    for (saga_id, call), calls in sorted(garbled.items()):
        kinds, understood = _CALLS[call]
        recorded = sum(1 for a in s.payments[saga_id].attempts
                       if a.get("kind") in kinds and a.get("outcome") not in understood)
        if recorded < calls:
            out.append(Violation("recorded", f"{calls} {call} calls answered with a body that "
                                 f"is not the gateway's, {recorded} recorded as not understood",
                                 (saga_id,)))
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


def _live(s: Snapshot) -> list[Reservation]:
    at = s.reservations.at
    return [r for r in s.reservations.rows
            if r.status == "RESERVED" and at is not None and r.expires_at > at]


def reservations_within_stock(s: Snapshot) -> list[Violation]:
    """For every product, the units live reservations hold are at most its units on hand:
    what a reservation promised is there to confirm."""
    held: dict[str, int] = defaultdict(int)
    for r in _live(s):
        held[r.sku] += r.quantity
    return [Violation("reservations", f"{sku}: {units} units held by live reservations, "
                      f"{s.final_stock.get(sku, 0)} on hand")
            for sku, units in sorted(held.items()) if units > s.final_stock.get(sku, 0)]


def confirmed_reservations_allocated(s: Snapshot) -> list[Violation]:
    """A CONFIRMED reservation became its saga's allocation: the allocation exists (allocated,
    or released since by the saga's cancellation) and took the units the reservation held."""
    out = []
    for r in s.reservations.rows:
        if r.status != "CONFIRMED":
            continue
        status, items = s.allocations.get(r.saga_id, ("", []))
        taken = sum(int(i["quantity"]) for i in items if i["sku"] == r.sku)
        if status not in ("ALLOCATED", "RELEASED"):
            out.append(Violation("reservations", f"reservation of {r.sku} CONFIRMED, the "
                                 f"allocation {status or 'missing'}", (r.saga_id,)))
        elif taken != r.quantity:
            out.append(Violation("reservations", f"reservation of {r.quantity} {r.sku} "
                                 f"CONFIRMED, {taken} allocated", (r.saga_id,)))
    return out


def no_race_lost_while_reserved(s: Snapshot) -> list[Violation]:
    """A saga whose payment could come within its payment step never loses the race: the step
    falls due before its reservation does (pedidos cuts it short to that end), and a payment
    inventario took while the reservation was live finds the units held for it. Only a
    payment taken after the expiry (the Check-Then-Pay path) may find the stock gone and be
    refunded."""
    out = []
    for r in s.reservations.rows:
        taken = s.reservations.payment_taken_at.get(r.saga_id)
        deadline = s.reservations.payment_deadline.get(r.saga_id)
        if deadline is not None and deadline > r.expires_at:
            out.append(Violation("reservations", f"payment step due {deadline.isoformat()}, "
                                 f"after its reservation of {r.sku} (until "
                                 f"{r.expires_at.isoformat()})", (r.saga_id,)))
        if (s.allocations.get(r.saga_id, ("", []))[0] == "FAILED" and taken is not None
                and taken < r.expires_at):
            out.append(Violation("reservations", f"allocation FAILED for a payment taken at "
                                 f"{taken.isoformat()} while its reservation of {r.sku} was "
                                 f"live (until {r.expires_at.isoformat()})", (r.saga_id,)))
    return out


def reservations_confirmed_when_taken(s: Snapshot) -> list[Violation]:
    """A payment inventario took while its saga's reservation was live, and allocated, took
    the units that reservation held: the row says CONFIRMED, never EXPIRED (the expiry job
    marking it under the allocation would count it expired and confirmed)."""
    out = []
    for r in s.reservations.rows:
        taken = s.reservations.payment_taken_at.get(r.saga_id)
        if (r.status == "EXPIRED" and taken is not None and taken < r.expires_at
                and s.allocations.get(r.saga_id, ("", []))[0] in ("ALLOCATED", "RELEASED")):
            out.append(Violation("reservations", f"reservation of {r.sku} EXPIRED, its units "
                                 f"allocated for a payment taken at {taken.isoformat()} "
                                 f"while it was live (until {r.expires_at.isoformat()})",
                                 (r.saga_id,)))
    return out


def reservations_end_with_their_saga(s: Snapshot) -> list[Violation]:
    """No saga that ended still holds units: its reservation was confirmed, released or
    expired (a hold left behind would keep the units from every other order until its
    expiry). Judged also after the expiry: a reservation left RESERVED or EXPIRED whose
    deadline came after inventario took its saga's cancellation held units for a saga that
    had ended (one taken after the cancellation, or one the cancellation missed)."""
    ended = {o.saga_id for o in s.orders.values() if o.status in TERMINAL}
    live = _live(s)
    out = [Violation("reservations", f"{r.quantity} {r.sku} still RESERVED by a saga that "
                     "ended", (r.saga_id,)) for r in live if r.saga_id in ended]
    for r in s.reservations.rows:
        cancelled = s.reservations.cancellation_taken_at.get(r.saga_id)
        if (r not in live and r.status in ("RESERVED", "EXPIRED")
                and cancelled is not None and cancelled < r.expires_at):
            out.append(Violation("reservations", f"{r.quantity} {r.sku} held until "
                                 f"{r.expires_at.isoformat()}, after inventario took its "
                                 f"saga's cancellation at {cancelled.isoformat()}",
                                 (r.saga_id,)))
    return out
