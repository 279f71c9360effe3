"""Where PostgreSQL's time goes: the services' statements by execution time (pg_stat_statements).

PostgreSQL spends a third of a saga's CPU at saturation, and py-spy cannot see into it. The
local stack loads ``pg_stat_statements``; the benchmark empties it before the profiled window
and reads it after, so each statement of the services' roles is reported by calls per saga and
milliseconds per call and per saga. Execution time is wall time inside the server: it includes
waits for locks and for a core, not the protocol around the statement nor its ``COMMIT``.

A statement that costs more as tables grow shows here first: the allocation's update scanned
the whole catalogue (7.7 ms of a 9 ms statement with 4,900 products) until it looked its
products up by key (inventario.adapters.stock_repository).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

# The services' runtime roles (``<service>_app``); the benchmark's own queries run as the admin.
_SERVICE_ROLES = "SELECT oid FROM pg_roles WHERE rolname LIKE '%\\_app'"
_TOP = f"""
SELECT calls, total_exec_time, shared_blks_hit + shared_blks_read AS blocks, query
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND userid IN ({_SERVICE_ROLES})
ORDER BY total_exec_time DESC"""


async def reset(conn: asyncpg.Connection) -> str | None:
    """Empties the statistics; returns why it could not (the extension not installed or not
    loaded), or None."""
    try:
        await conn.execute("SELECT pg_stat_statements_reset()")
    except (asyncpg.UndefinedFunctionError, asyncpg.ObjectNotInPrerequisiteStateError) as exc:
        return f"pg_stat_statements unavailable: {exc}"
    return None


async def top(conn: asyncpg.Connection, sagas: int, n: int = 10) -> dict[str, Any]:
    return summarise(await conn.fetch(_TOP), sagas, n)


def one_line(query: str) -> str:
    return re.sub(r"\s+", " ", query).strip()


def shorten(statement: str, width: int = 110) -> str:
    """A one-line statement cut to ``width``: its first CTE's name and table say which."""
    return statement if len(statement) <= width else statement[:width - 1] + "…"


def summarise(rows: Sequence[Mapping[str, Any]], sagas: int, n: int = 10) -> dict[str, Any]:
    """The ``n`` statements with the most execution time, per call and per completed saga,
    and the total of every statement of the services per saga. Rows of the same text count
    together: PostgreSQL keeps one per parameter types the text was prepared with."""
    merged: dict[str, dict[str, float]] = {}
    for r in rows:
        m = merged.setdefault(one_line(r["query"]), {"calls": 0, "ms": 0.0, "blocks": 0})
        m["calls"] += r["calls"]
        m["ms"] += float(r["total_exec_time"])
        m["blocks"] += r["blocks"]
    total_ms = sum(m["ms"] for m in merged.values())
    per_saga = max(sagas, 1)
    statements = [{
        "statement": shorten(query),
        "calls_per_saga": round(m["calls"] / per_saga, 2),
        "ms_per_call": round(m["ms"] / m["calls"], 3) if m["calls"] else None,
        "ms_per_saga": round(m["ms"] / per_saga, 3),
        "share": round(m["ms"] / total_ms, 3) if total_ms else 0.0,
        "blocks_per_call": round(m["blocks"] / m["calls"], 1) if m["calls"] else None,
    } for query, m in sorted(merged.items(), key=lambda kv: -kv[1]["ms"])[:n]]
    return {"sagas": sagas, "statements_ms_per_saga": round(total_ms / per_saga, 3),
            "top": statements}
