"""The stack's PostgreSQL is the pinned version (deploy/postgres-version), with what the stack
asks of it: pg_stat_statements loaded, commit timestamps, and PostgreSQL 18's data checksums
(initdb's default since 18: a page corrupted on disk is an error, not wrong rows)."""

from __future__ import annotations

import asyncpg

from local_stack.postgres.binaries import POSTGRES_VERSION
from saga_harness import config


async def test_the_stack_runs_the_pinned_postgresql(running_stack: None) -> None:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        assert await conn.fetchval("SHOW server_version") == POSTGRES_VERSION
        assert await conn.fetchval("SHOW data_checksums") == "on"
        assert await conn.fetchval("SHOW track_commit_timestamp") == "on"
        assert await conn.fetchval("SELECT count(*) FROM pg_stat_statements") >= 0
    finally:
        await conn.close()
