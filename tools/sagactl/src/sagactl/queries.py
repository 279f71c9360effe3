"""Read-only queries over the three schemas (as an operator role)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

SERVICES = ("pedidos", "inventario", "pagos")
ACTIVE = ("PENDIENTE_VALIDACION", "PENDIENTE_PAGO", "PENDIENTE_ASIGNACION", "PENDIENTE_REEMBOLSO")


async def sagas(conn: asyncpg.Connection, *, statuses: list[str] | None, older_than_s: float,
                stuck_only: bool, limit: int) -> list[dict[str, Any]]:
    """Sagas by state and age; stuck = active and past a deadline, or idle for too long."""
    rows = await conn.fetch(
        """
        SELECT saga_id, order_id, status, current_step, started_at, updated_at,
               step_deadline_at, expires_at,
               extract(epoch FROM now() - started_at) AS age_s,
               extract(epoch FROM now() - updated_at) AS idle_s,
               status = ANY($4::text[]) AND (step_deadline_at < now() OR expires_at < now()
                   OR now() - updated_at > make_interval(secs => $2)) AS stuck
        FROM pedidos.sagas
        WHERE ($1::text[] IS NULL OR status = ANY($1::text[]))
          AND now() - started_at >= make_interval(secs => $2)
        ORDER BY started_at LIMIT $3
        """, statuses, older_than_s, limit, list(ACTIVE))
    out = [dict(r) for r in rows]
    return [r for r in out if r["stuck"]] if stuck_only else out


async def timeline(conn: asyncpg.Connection, saga_id: str) -> list[dict[str, Any]]:
    """Transitions, events emitted and consumed, payment attempts: one saga, in time order."""
    entries: list[dict[str, Any]] = []
    for r in await conn.fetch("SELECT at, event_type, from_status, to_status, actor, detail "
                              "FROM pedidos.saga_audit WHERE saga_id = $1::uuid ORDER BY id",
                              saga_id):
        entries.append({"at": r["at"], "where": "pedidos", "what": "transition",
                        "detail": f"{r['event_type']}: {r['from_status']} -> {r['to_status']}"
                                  f" ({r['actor']})"})
    for svc in SERVICES:
        for r in await conn.fetch(
                f"SELECT created_at, published_at, event_type, topic, status, attempts, "
                f"payload->>'span_id' AS span, headers->>'traceparent' AS traceparent "
                f"FROM {svc}.outbox WHERE saga_id = $1 ORDER BY id", saga_id):
            lag = ((r["published_at"] - r["created_at"]).total_seconds() * 1000
                   if r["published_at"] else None)
            entries.append({"at": r["created_at"], "where": svc, "what": "emitted",
                            "detail": f"{r['event_type']} -> {r['topic']} [{r['status']}"
                                      + (f", published +{lag:.1f} ms" if lag is not None else "")
                                      + f"] span {r['span']}"
                                      + (f" trace {r['traceparent'].split('-')[1]}"
                                         if r["traceparent"] else "")})
        for r in await conn.fetch(
                f"SELECT processed_at, event_type, status, message_id "
                f"FROM {svc}.processed_messages WHERE saga_id = $1", saga_id):
            entries.append({"at": r["processed_at"], "where": svc, "what": "consumed",
                            "detail": f"{r['event_type']} {r['message_id']} [{r['status']}]"})
    for r in await conn.fetch("SELECT status, attempt_log FROM pagos.payments WHERE saga_id = $1",
                              saga_id):
        for a in json.loads(r["attempt_log"]) if isinstance(r["attempt_log"], str) \
                else r["attempt_log"]:
            entries.append({"at": a["at"], "where": "pagos", "what": f"gateway {a['kind']}",
                            "detail": f"attempt {a['attempt']}: {a['outcome']} {a['detail']}"})
    return sorted(entries, key=lambda e: str(e["at"]))
