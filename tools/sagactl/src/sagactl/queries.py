"""The dead letters, read from the services' outbox tables (``dlq``, ``replay``)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

SERVICES = ("pedidos", "inventario", "pagos")


async def dead_letters(conn: asyncpg.Connection, service: str | None, limit: int
                       ) -> list[dict[str, Any]]:
    out = []
    for svc in ([service] if service else SERVICES):
        for r in await conn.fetch(
                f"SELECT message_id, created_at, saga_id, event_type, payload, status "
                f"FROM {svc}.outbox WHERE topic = $1 ORDER BY id DESC LIMIT $2",
                f"{svc}-dlq", limit):
            body = r["payload"] if isinstance(r["payload"], dict) else json.loads(r["payload"])
            out.append({"id": str(r["message_id"]), "service": svc, "at": r["created_at"],
                        "saga_id": r["saga_id"], "event_type": r["event_type"],
                        "reason": body.get("reason"), "attempts": body.get("attempts", []),
                        "original": body.get("original", {}), "published": r["status"]})
    return sorted(out, key=lambda d: d["at"], reverse=True)[:limit]


async def dead_letter(conn: asyncpg.Connection, service: str, dead_letter_id: str
                      ) -> dict[str, Any] | None:
    row = await conn.fetchrow(f"SELECT payload FROM {service}.outbox WHERE message_id = $1::uuid "
                              "AND topic = $2", dead_letter_id, f"{service}-dlq")
    if row is None:
        return None
    return row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
