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
from sqlalchemy import pool, text
from sqlalchemy.engine import Connection

from sagakit.store.postgres_url import create_engine_for

# Session-level, taken before Alembic reads the version table and released after the commit:
# one upgrade of a schema at a time, whatever its transactions.
MIGRATION_LOCK = "SELECT pg_advisory_lock(hashtextextended(:key, 0))"
MIGRATION_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(:key, 0))"


def migration_lock_key(schema: str) -> str:
    return f"alembic-upgrade:{schema}"


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
        engine = create_engine_for(url, poolclass=pool.NullPool)
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
