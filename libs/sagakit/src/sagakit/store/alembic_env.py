"""The body of every service's ``migrations/env.py``.

Migrations run as a start step under the schema's owner role (``DATABASE_URL``), with Alembic's
version table inside the service's own schema, so each service migrates independently.

Replicas of a service may start together and each run this step: the whole upgrade runs under
an advisory lock of the schema (``MIGRATION_LOCK``), so one migrates while the others wait, and
they then find the schema at head. Without it two upgrades of a fresh schema both create the
version table and the tables, and one fails (libs/sagakit/tests/integration/
test_concurrent_migrations.py).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from alembic import context
from pydantic import Field
from pydantic_settings import BaseSettings
from sqlalchemy import pool, text
from sqlalchemy.engine import Connection

from sagakit.store.database import PEER_KEEPALIVE
from sagakit.store.postgres_url import create_engine_for

# Session-level, taken before Alembic reads the version table and released after the commit:
# one upgrade of a schema at a time, whatever its transactions.
MIGRATION_LOCK = "SELECT pg_advisory_lock(hashtextextended(:key, 0))"
MIGRATION_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(:key, 0))"


def migration_lock_key(schema: str) -> str:
    return f"alembic-upgrade:{schema}"


class MigrationSettings(BaseSettings):
    # A migration sends its statements back to back: a minute of silence is a hung migrator,
    # not a slow migration (a long statement is not silence: the server is working on it).
    db_migration_idle_timeout_s: float = Field(
        60.0, ge=1, le=3600, validation_alias="DB_MIGRATION_IDLE_TIMEOUT_S", description=(
            "PostgreSQL ends the session of a migration that has sent nothing for this long, in "
            "a transaction or between two, and with it the migration lock: the longest a hung "
            "migrator keeps the other instances from starting."))


def migration_session_settings(idle_timeout_s: float) -> dict[str, str]:
    """The migration connection's: the lock is released when its holder hangs or vanishes."""
    idle = f"{round(idle_timeout_s * 1000)}ms"
    return {**PEER_KEEPALIVE, "idle_in_transaction_session_timeout": idle,
            "idle_session_timeout": idle}


def run_migrations(schema: str) -> None:
    url = os.environ.get("DATABASE_URL") or context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("DATABASE_URL is not set (the schema owner's connection URL)")

    def configure(connection: Connection | None = None, **kw: Any) -> None:
        context.configure(connection=connection, version_table_schema=schema,
                          include_schemas=False, transaction_per_migration=True, **kw)

    if context.is_offline_mode():
        configure(url=url, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return

    key = {"key": migration_lock_key(schema)}

    def do_run(connection: Connection) -> None:
        connection.execute(text(MIGRATION_LOCK), key)
        connection.execute(text(f"SET search_path TO {schema}"))
        configure(connection)
        with context.begin_transaction():
            context.run_migrations()

    async def main() -> None:
        idle_s = MigrationSettings().db_migration_idle_timeout_s
        engine = create_engine_for(url, poolclass=pool.NullPool,
                                   server_settings=migration_session_settings(idle_s))
        try:
            async with engine.connect() as conn:
                await conn.run_sync(do_run)
                await conn.commit()
                # Also released when the connection closes; said here so that a reused
                # connection never keeps it.
                await conn.execute(text(MIGRATION_UNLOCK), key)
                await conn.commit()
        finally:
            await engine.dispose()

    asyncio.run(main())
