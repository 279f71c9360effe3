"""How long each saga and each hop took, read afterwards from the stack's own rows: the order's
audit trail, the outbox's published marks and the inbox's processed times (commit timestamps
where PostgreSQL keeps them)."""

from __future__ import annotations

from typing import Any

import asyncpg

from bench.common import pct, summary_ms

TERMINAL = ("COMPLETADA", "CANCELADA_SIN_STOCK", "CANCELADA_PRECIO_RECHAZADO",
            "CANCELADA_PAGO_RECHAZADO",
            "CANCELADA_CON_REEMBOLSO", "CANCELADA_TIMEOUT", "CANCELADA_POR_USUARIO",
            "REEMBOLSO_FALLIDO", "TIMED_OUT")


async def saga_latencies(conn: asyncpg.Connection, saga_ids: list[str]) -> dict[str, Any]:
    """Request → terminal state, from the audit trail; and the outcome counts."""
    rows = await conn.fetch(
        "SELECT o.status, extract(epoch FROM max(a.at) FILTER (WHERE a.to_status = o.status "
        "AND a.from_status IS DISTINCT FROM a.to_status) - min(a.at)) AS seconds "
        "FROM pedidos.orders o JOIN pedidos.saga_audit a ON a.saga_id = o.saga_id "
        "WHERE o.saga_id = ANY($1::uuid[]) GROUP BY o.saga_id, o.status", saga_ids)
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r["status"]] = outcomes.get(r["status"], 0) + 1
    done = [float(r["seconds"]) for r in rows if r["status"] in TERMINAL and r["seconds"]]
    return {"latency": summary_ms(done), "outcomes": outcomes}


HOPS = [  # (event, emitted by, consumed by on the critical path)
    ("OrdenSolicitada", "pedidos", "inventario"),
    ("StockVerificado", "inventario", "pagos"),
    ("PagoExitoso", "pagos", "inventario"),
    ("StockAsignado", "inventario", "pedidos"),
]

# The commit of the transaction that wrote each hop's event, from rows no later transaction
# rewrites (an outbox row is rewritten by the relay's mark): pedidos' first audit row, the
# inbox row of the event the producer was handling. pagos commits a charge's outcome in a
# transaction of its own with no such row (its payment row is rewritten again when the
# allocation's outcome arrives), so PagoExitoso's stands as the outbox row's creation: that
# transaction's start, less than a statement before its commit.
_PRODUCER_COMMIT = {
    "OrdenSolicitada": "(SELECT pg_xact_commit_timestamp(a.xmin) FROM pedidos.saga_audit a "
                       "WHERE a.saga_id = o.saga_id::uuid AND a.from_status IS NULL)",
    "StockVerificado": "(SELECT pg_xact_commit_timestamp(i.xmin) FROM pedidos.outbox x "
                       "JOIN inventario.processed_messages i ON i.message_id = x.message_id::text"
                       " WHERE x.saga_id = o.saga_id AND x.event_type = 'OrdenSolicitada')",
    "PagoExitoso": "o.created_at",
    "StockAsignado": "(SELECT pg_xact_commit_timestamp(i.xmin) FROM pagos.outbox x "
                     "JOIN inventario.processed_messages i ON i.message_id = x.message_id::text "
                     "WHERE x.saga_id = o.saga_id AND x.event_type = 'PagoExitoso')",
}


def _p(values: list[float], q: float) -> float:
    return round(pct(values, q) * 1000, 2)


async def hop_latencies(conn: asyncpg.Connection, saga_ids: list[str]) -> dict[str, Any]:
    """Per hop: the producer's commit → broker acknowledgement (the relay: notification, select,
    send, acknowledgement), acknowledgement → the consumer's transaction start (Kafka's
    delivery to the consumer and its loop), and that transaction (start → commit). Without
    commit timestamps (track_commit_timestamp off) the producing transaction's start stands in
    for its commit, which makes the first hop look a little longer."""
    exact = await conn.fetchval("SHOW track_commit_timestamp") == "on"
    out: dict[str, Any] = {}
    for event, producer, consumer in HOPS:
        commit = _PRODUCER_COMMIT[event] if exact else "o.created_at"
        consumer_commit = "pg_xact_commit_timestamp(p.xmin)" if exact else "NULL"
        rows = await conn.fetch(
            f"SELECT extract(epoch FROM o.published_at - {commit}) AS relay, "
            f"extract(epoch FROM p.processed_at - o.published_at) AS delivery, "
            f"extract(epoch FROM {consumer_commit} - p.processed_at) AS handler "
            f"FROM {producer}.outbox o JOIN {consumer}.processed_messages p "
            f"ON p.message_id = o.message_id::text "
            f"WHERE o.event_type = $1 AND o.saga_id = ANY($2::text[])", event, saga_ids)
        relay = [float(r["relay"]) for r in rows if r["relay"] is not None]
        delivery = [max(0.0, float(r["delivery"])) for r in rows if r["delivery"] is not None]
        handler = [float(r["handler"]) for r in rows if r["handler"] is not None]
        out[f"{event} {producer}->{consumer}"] = {
            "commit_to_ack_p50_ms": _p(relay, 0.5), "commit_to_ack_p99_ms": _p(relay, 0.99),
            "ack_to_consumer_p50_ms": _p(delivery, 0.5),
            "ack_to_consumer_p99_ms": _p(delivery, 0.99),
            **({"consumer_tx_p50_ms": _p(handler, 0.5), "consumer_tx_p99_ms": _p(handler, 0.99)}
               if handler else {}),
            "from": "commit" if exact else "transaction start"}
    rows = await conn.fetch(
        "SELECT p.updated_at, p.created_at FROM pagos.payments p "
        "WHERE p.saga_id = ANY($1::text[])", saga_ids)
    charge = [(r["updated_at"] - r["created_at"]).total_seconds() for r in rows]
    out["pagos charge (row created -> outcome committed, gateway call included)"] = {
        "p50_ms": _p(charge, 0.5), "p99_ms": _p(charge, 0.99)}
    return out
