"""The database's upkeep of a load, done before an idle stack is measured.

A load leaves dead row versions and unanalysed changes behind; autovacuum deals with them
later, and when is up to its launcher, which looks at a database once a minute
(``autovacuum_naptime``). Waiting only until no worker is running is not enough: right after
a load, usually none has been started yet: workers were seen analysing five tables 39 s
after the load, inside the idle window, PostgreSQL 5.4 % of a core instead of 0.1. So the
benchmark does that upkeep itself: every table past autovacuum's own thresholds is vacuumed
and analysed, then a checkpoint writes out what it dirtied.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg

# autovacuum's formulas (PostgreSQL's relation_needs_vacanalyze) with the server's settings;
# per-table storage parameters are not read: no table of the services sets any. A table
# never vacuumed has reltuples -1, which autovacuum takes as 0.
TABLES_DUE = """
WITH s AS (
    SELECT current_setting('autovacuum_vacuum_threshold')::float8 AS vt,
           current_setting('autovacuum_vacuum_scale_factor')::float8 AS vs,
           current_setting('autovacuum_vacuum_insert_threshold')::float8 AS it,
           current_setting('autovacuum_vacuum_insert_scale_factor')::float8 AS "is",
           current_setting('autovacuum_analyze_threshold')::float8 AS at,
           current_setting('autovacuum_analyze_scale_factor')::float8 AS "as"
)
SELECT format('%I.%I', t.schemaname, t.relname) AS name
FROM pg_stat_user_tables t
JOIN pg_class c ON c.oid = t.relid, s
WHERE t.n_dead_tup > s.vt + s.vs * greatest(c.reltuples, 0)
   OR t.n_ins_since_vacuum > s.it + s."is" * greatest(c.reltuples, 0)
   OR t.n_mod_since_analyze > s.at + s."as" * greatest(c.reltuples, 0)
ORDER BY 1
"""

# An idle backend sends its statistics at most this long after its last transaction
# (PGSTAT_IDLE_INTERVAL, 10 s): until then a table's counters may not show the load yet.
STATISTICS_SETTLE_S = 11.0


async def tables_due(conn: asyncpg.Connection) -> list[str]:
    """The tables autovacuum would vacuum or analyse now, from the statistics sent so far."""
    return [r["name"] for r in await conn.fetch(TABLES_DUE)]


async def autovacuum_running(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"))


async def do_upkeep(conn: asyncpg.Connection, timeout_s: float = 300.0) -> list[str]:
    """Waits for autovacuum's running workers, vacuums and analyses every table still due,
    then checkpoints; returns the tables it vacuumed. ``conn`` must be a superuser's (or the
    tables' owner's)."""
    started = time.perf_counter()
    done: list[str] = []
    while time.perf_counter() - started < timeout_s:
        if await autovacuum_running(conn):
            await asyncio.sleep(1.0)  # the database's state, polled
            continue
        due = [t for t in await tables_due(conn) if t not in done]
        if not due:
            break
        for table in due:
            # The name comes from the catalogue, quoted by format(%I).
            await conn.execute(f"VACUUM (ANALYZE) {table}")
            done.append(table)
        # This session's own counts (the vacuums) are sent now, not in a second.
        await conn.execute("SELECT pg_stat_force_next_flush()")
    await conn.execute("CHECKPOINT")
    return done
