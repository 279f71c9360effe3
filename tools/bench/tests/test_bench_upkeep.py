"""The benchmark measures an idle stack only after doing the load's database upkeep itself:
every table autovacuum would vacuum or analyse is found and done, so no worker starts later
inside the idle window (bench/upkeep.py)."""

from __future__ import annotations

import asyncpg

from bench import upkeep
from saga_harness import config

SCHEMA = "bench_upkeep_test"


async def test_the_tables_a_load_left_for_autovacuum_are_found_and_done(running_stack: None
                                                                        ) -> None:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        await conn.execute(f"CREATE SCHEMA {SCHEMA}")
        # Left to the test alone: autovacuum must not do the upkeep between the two looks.
        await conn.execute(f"CREATE TABLE {SCHEMA}.rows (id int PRIMARY KEY, v int) "
                           "WITH (autovacuum_enabled = false)")
        await conn.execute(f"CREATE TABLE {SCHEMA}.untouched (id int PRIMARY KEY) "
                           "WITH (autovacuum_enabled = false)")
        await conn.execute(f"INSERT INTO {SCHEMA}.rows SELECT g, 0 FROM generate_series(1, 3000) g")
        await conn.execute(f"UPDATE {SCHEMA}.rows SET v = 1 WHERE id <= 1000")
        await conn.execute(f"INSERT INTO {SCHEMA}.untouched VALUES (1)")
        await conn.execute("SELECT pg_stat_force_next_flush()")
        await conn.execute("SELECT 1")  # the flush happens at the end of a statement

        due = await upkeep.tables_due(conn)
        assert f"{SCHEMA}.rows" in due
        # One row is below every threshold: nothing for autovacuum to do there.
        assert f"{SCHEMA}.untouched" not in due

        vacuumed = await upkeep.do_upkeep(conn, timeout_s=120)
        assert f"{SCHEMA}.rows" in vacuumed
        assert f"{SCHEMA}.untouched" not in vacuumed
        await conn.execute("SELECT pg_stat_force_next_flush()")
        await conn.execute("SELECT 1")
        assert f"{SCHEMA}.rows" not in await upkeep.tables_due(conn)
        stats = await conn.fetchrow(
            "SELECT n_dead_tup, n_mod_since_analyze, last_vacuum IS NOT NULL AS vacuumed, "
            "last_analyze IS NOT NULL AS analysed FROM pg_stat_user_tables "
            "WHERE schemaname = $1 AND relname = 'rows'", SCHEMA)
        assert stats["vacuumed"] and stats["analysed"]
        assert stats["n_dead_tup"] == 0 and stats["n_mod_since_analyze"] == 0
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        await conn.close()
