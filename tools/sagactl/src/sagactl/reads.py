"""What sagactl reads, through the services' published views only (docs/operations.md, "The
read contract"): ``pedidos_read``, ``inventario_read``, ``pagos_read``, version 1. A view it
names here is one it depends on: the read contract's test fails if one disappears."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import asyncpg

SERVICES = ("pedidos", "inventario", "pagos")
ACTIVE = ("PENDIENTE_VALIDACION", "PENDIENTE_PAGO", "PENDIENTE_ASIGNACION", "PENDIENTE_REEMBOLSO")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


async def sagas(conn: asyncpg.Connection, *, statuses: list[str] | None, older_than_s: float,
                stuck_only: bool, limit: int) -> list[dict[str, Any]]:
    """Sagas by state and age; stuck = active and past a deadline, or idle for too long."""
    rows = await conn.fetch(
        """
        SELECT saga_id, order_id, customer_id, status, current_step, total_amount, currency,
               started_at, updated_at, step_deadline_at, expires_at, trace_id,
               extract(epoch FROM now() - started_at)::float8 AS age_s,
               extract(epoch FROM now() - updated_at)::float8 AS idle_s,
               status = ANY($4::text[]) AND (step_deadline_at < now() OR expires_at < now()
                   OR now() - updated_at > make_interval(secs => $2)) AS stuck
        FROM pedidos_read.sagas_v1
        WHERE ($1::text[] IS NULL OR status = ANY($1::text[]))
          AND now() - started_at >= make_interval(secs => $2)
          AND (NOT $5 OR (status = ANY($4::text[]) AND (step_deadline_at < now()
               OR expires_at < now() OR now() - updated_at > make_interval(secs => $2))))
        ORDER BY started_at LIMIT $3
        """, statuses, older_than_s, limit, list(ACTIVE), stuck_only)
    return [dict(r) for r in rows]


def _trace(traceparent_trace_id: str | None) -> str:
    return f" trace {traceparent_trace_id}" if traceparent_trace_id else ""


async def timeline(conn: asyncpg.Connection, saga_id: str) -> list[dict[str, Any]]:
    """Transitions, events emitted and consumed, gateway attempts and operators' actions: one
    saga, in time order. Empty when pedidos knows no such saga."""
    entries: list[dict[str, Any]] = []
    for r in await conn.fetch(
            "SELECT at, event_type, from_status, to_status, actor FROM "
            "pedidos_read.saga_history_v1 WHERE saga_id = $1::uuid ORDER BY id", saga_id):
        entries.append({"at": r["at"], "where": "pedidos", "what": "transition",
                        "detail": f"{r['event_type']}: {r['from_status']} -> {r['to_status']}"
                                  f" ({r['actor']})"})
    if not entries:
        return []
    for svc in SERVICES:
        for r in await conn.fetch(
                f"SELECT created_at, published_at, event_type, topic, status, trace_id "
                f"FROM {svc}_read.outbox_v1 WHERE saga_id = $1 ORDER BY id", saga_id):
            lag = ((r["published_at"] - r["created_at"]).total_seconds() * 1000
                   if r["published_at"] else None)
            entries.append({"at": r["created_at"], "where": svc, "what": "emitted",
                            "detail": f"{r['event_type']} -> {r['topic']} [{r['status']}"
                                      + (f", published +{lag:.1f} ms" if lag is not None else "")
                                      + "]" + _trace(r["trace_id"])})
        for r in await conn.fetch(
                f"SELECT processed_at, event_type, status, message_id "
                f"FROM {svc}_read.inbox_v1 WHERE saga_id = $1", saga_id):
            entries.append({"at": r["processed_at"], "where": svc, "what": "consumed",
                            "detail": f"{r['event_type']} {r['message_id']} [{r['status']}]"})
        for r in await conn.fetch(
                f"SELECT at, operator, action, target, reason FROM {svc}_read.operator_actions_v1"
                f" WHERE saga_id = $1 ORDER BY id", saga_id):
            entries.append({"at": r["at"], "where": svc, "what": f"operator {r['action']}",
                            "detail": f"by {r['operator']}"
                                      + (f" on {r['target']}" if r["target"] != saga_id else "")
                                      + (f": {r['reason']}" if r["reason"] else "")})
    for r in await conn.fetch(
            "SELECT at, kind, attempt, outcome, detail FROM pagos_read.payment_attempts_v1 "
            "WHERE saga_id = $1 ORDER BY seq", saga_id):
        entries.append({"at": r["at"], "where": "gateway", "what": f"gateway {r['kind']}",
                        "detail": f"attempt {r['attempt']}: {r['outcome']} {r['detail'] or ''}"
                                  .rstrip()})
    # An entry without a time (an attempt recorded without one) goes last.
    return sorted(entries, key=lambda e: (e["at"] is None, e["at"] or _EPOCH))


async def payments(conn: asyncpg.Connection, *, needing_action: bool, saga_id: str | None,
                   limit: int) -> list[dict[str, Any]]:
    """Payments (the newest first), or only those that need a person."""
    if needing_action:
        rows = await conn.fetch(
            "SELECT payment_id, saga_id, order_id, status, amount, currency, charge_id, "
            "amount_refunded, refund_attempts, resolve_attempts, marked_at "
            "FROM pagos_read.payments_needing_action_v1 "
            "WHERE $1::text IS NULL OR saga_id = $1 ORDER BY marked_at LIMIT $2",
            saga_id, limit)
    else:
        rows = await conn.fetch(
            "SELECT payment_id, saga_id, order_id, status, amount, currency, charge_id, "
            "amount_refunded, manual_refund_required, resolution_reference, resolved_by, "
            "resolved_at, updated_at FROM pagos_read.payments_v1 "
            "WHERE $1::text IS NULL OR saga_id = $1 ORDER BY updated_at DESC LIMIT $2",
            saga_id, limit)
    return [dict(r) for r in rows]
