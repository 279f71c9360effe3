"""The body of every service's ``migrations/env.py``.

Migrations run as a start step under the schema's owner role (``DATABASE_URL``), with Alembic's
version table inside the service's own schema, so each service migrates independently.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from alembic import context
from sqlalchemy import pool, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine


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

    def do_run(connection: Connection) -> None:
        connection.execute(text(f"SET search_path TO {schema}"))
        configure(connection)
        with context.begin_transaction():
            context.run_migrations()

    async def main() -> None:
        engine = create_async_engine(url, poolclass=pool.NullPool)
        async with engine.connect() as conn:
            await conn.run_sync(do_run)
            await conn.commit()
        await engine.dispose()

    asyncio.run(main())
