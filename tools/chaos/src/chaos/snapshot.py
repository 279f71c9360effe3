"""Reads a checker snapshot from the running stack (admin role, gateway ledger)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import asyncpg
import httpx

from chaos.checker import Order, Payment, Reservation, Reservations, Snapshot
from netproxy.layout import CONTROL_PORT
from saga_harness import config


def _items(value: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An ``items`` jsonb column: asyncpg hands jsonb over as text unless a codec is set."""
    return json.loads(value) if isinstance(value, str) else value


async def take(acknowledged: list[str], initial_stock: dict[str, int],
               stale_after_s: float = 60.0) -> Snapshot:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        # The acknowledged orders and every other order of the run's products: a request whose
        # answer the client never saw (it timed out while the database restarted) may still
        # have been committed, and its saga moves stock and money like any other.
        rows = await conn.fetch(
            "SELECT order_id::text, saga_id::text, status, total_amount, items "
            "FROM pedidos.orders o WHERE order_id = ANY($1::uuid[]) OR EXISTS (SELECT 1 FROM "
            "jsonb_array_elements(o.items) i WHERE i->>'sku' = ANY($2::text[]))",
            list(acknowledged), list(initial_stock))
        orders = {r["order_id"]: Order(r["order_id"], r["saga_id"], r["status"],
                                       Decimal(r["total_amount"]), _items(r["items"]))
                  for r in rows}
        sagas = [o.saga_id for o in orders.values()]
        allocations = {r["saga_id"]: (r["status"], _items(r["items"])) for r in await conn.fetch(
            "SELECT saga_id, status, items FROM inventario.allocations "
            "WHERE saga_id = ANY($1::text[])", sagas)}
        final_stock = {r["sku"]: r["quantity"] for r in await conn.fetch(
            "SELECT sku, quantity FROM inventario.products WHERE sku = ANY($1::text[])",
            list(initial_stock))}
        stale = []
        for svc in ("pedidos", "inventario", "pagos"):
            stale += [(svc, r["saga_id"], float(r["age"])) for r in await conn.fetch(
                f"SELECT saga_id, extract(epoch FROM now() - created_at) AS age FROM "
                f"{svc}.outbox WHERE status <> 'published' AND saga_id = ANY($1::text[]) "
                f"AND now() - created_at > make_interval(secs => $2)", sagas, stale_after_s)]
        # Every message pedidos recorded as processed left its mark in the audit trail.
        orphans = [("pedidos", r["message_id"]) for r in await conn.fetch(
            "SELECT p.message_id FROM pedidos.processed_messages p WHERE p.status = 'processed' "
            "AND p.saga_id = ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM pedidos.saga_audit a "
            "WHERE a.message_id = p.message_id)", sagas)]
        payments = {r["saga_id"]: Payment(r["status"], r["charge_id"],
                                          r["manual_refund_required"], _items(r["attempt_log"]))
                    for r in await conn.fetch(
            "SELECT saga_id, status, charge_id, manual_refund_required, attempt_log "
            "FROM pagos.payments WHERE saga_id = ANY($1::text[])", sagas)}
        # Every allocation request inventario processed has its allocation row.
        orphans += [("inventario", r["message_id"]) for r in await conn.fetch(
            "SELECT p.message_id FROM inventario.processed_messages p WHERE p.status = "
            "'processed' AND p.event_type = 'PagoExitoso' AND p.saga_id = ANY($1::text[]) "
            "AND NOT EXISTS (SELECT 1 FROM inventario.allocations a WHERE a.saga_id = p.saga_id)",
            sagas)]
        held = await reservations(conn, sagas, list(initial_stock))
    finally:
        await conn.close()
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.get(f"{config.GATEWAY}/ledger", headers=config.gateway_auth())
        answer.raise_for_status()
        ledger = answer.json()
    keys = {f"charge-{s}" for s in sagas}
    charges = [c for c in ledger["charges"] if c["idempotency_key"] in keys]
    ids = {c["id"] for c in charges}
    refunds = [r for r in ledger["refunds"] if r["charge"] in ids]
    garbled = [k for k in await garbled_gateway_calls()
               if k.partition("-")[2] in set(sagas)]
    return Snapshot(orders, acknowledged, initial_stock, final_stock, allocations, charges,
                    refunds, stale, orphans, payments, garbled, held)


async def has_reservations(conn: asyncpg.Connection) -> bool:
    """Whether inventario has reservations (reserve_then_pay): a stack without the table has
    Check-Then-Pay alone, and the reservation invariants hold vacuously."""
    return bool(await conn.fetchval(
        "SELECT to_regclass('inventario.reservations') IS NOT NULL"))


async def reservations(conn: asyncpg.Connection, sagas: list[str], skus: list[str]
                       ) -> Reservations:
    """Every reservation of the run's products (whichever saga holds it: the units on hand
    are shared) and of its sagas, the database's clock, when inventario took each saga's
    PagoExitoso and OrdenCancelada, and when pedidos' history says each reserving saga's
    payment step fell due."""
    if not await has_reservations(conn):
        return Reservations()
    rows = [Reservation(r["saga_id"], r["sku"], int(r["quantity"]), r["status"],
                        r["expires_at"]) for r in await conn.fetch(
        "SELECT saga_id, sku, quantity, status, expires_at FROM inventario.reservations "
        "WHERE sku = ANY($1::text[]) OR saga_id = ANY($2::text[])", skus, sagas)]
    async def taken(event_type: str) -> dict[str, Any]:
        return {r["saga_id"]: r["at"] for r in await conn.fetch(
            "SELECT saga_id, min(processed_at) AS at FROM inventario.processed_messages "
            "WHERE event_type = $2 AND status = 'processed' "
            "AND saga_id = ANY($1::text[]) GROUP BY saga_id", sagas, event_type)}
    deadlines = {r["saga_id"]: r["due"] for r in await conn.fetch(
        "SELECT saga_id::text AS saga_id, max((detail->>'step_deadline_at')::timestamptz) "
        "AS due FROM pedidos.saga_audit WHERE to_status = 'PENDIENTE_PAGO' "
        "AND detail ? 'step_deadline_at' AND saga_id::text = ANY($1::text[]) "
        "GROUP BY saga_id", sagas)}
    return Reservations(True, rows, await conn.fetchval("SELECT now()"),
                        await taken("PagoExitoso"), deadlines, await taken("OrdenCancelada"))


async def garbled_gateway_calls() -> list[str]:
    """The idempotency keys of the gateway calls the TCP proxy answered itself (reply faults),
    on every instance's route to the gateway; none when the proxy does not run."""
    control = f"http://127.0.0.1:{CONTROL_PORT}"
    async with httpx.AsyncClient(timeout=10) as http:
        try:
            routes = (await http.get(f"{control}/routes")).json()
        except httpx.HTTPError:
            return []
        keys: list[str] = []
        for route in routes:
            if route["name"].endswith("-gateway"):
                answer = await http.get(f"{control}/routes/{route['name']}/garbled")
                answer.raise_for_status()
                keys += [g["idempotency_key"] for g in answer.json() if g["idempotency_key"]]
        return keys
