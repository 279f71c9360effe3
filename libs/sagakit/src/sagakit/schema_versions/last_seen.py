"""When the service last produced and consumed each schema version, kept in its database: the
table ``<service>.schema_version_use``, one row per event type, version and use, its
``last_seen_at`` moved forward every ``SAGA_SCHEMA_USE_FLUSH_S`` from what the process counted
(``sagakit.schema_versions.use``), never back. Published to operators as
``<service>_read.schema_version_use_v1``; ``sagactl schemas retire`` reads it in every service
and refuses to retire a version one of them used within the retirement window.

A write per flush and per version in use, not per event: a version stays "seen" up to one
flush interval after its last use is counted, which the retirement window (days) dwarfs.

As with ``sagakit.store.migrations``, the migration functions are frozen once released.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sagakit.schema_versions.use import SCHEMA_USE, SchemaVersionUse
from sagakit.store.read_views import drop_view, publish_view

log = logging.getLogger("sagakit.schema_versions")

TABLE = "schema_version_use"
VIEW = "schema_version_use_v1"


def create_schema_version_use_v1(op: Any, schema: str) -> None:
    """The table and its published view ``<schema>_read.schema_version_use_v1`` (the schema is
    named as the service)."""
    op.create_table(
        TABLE,
        sa.Column("event_type", sa.Text, primary_key=True),
        sa.Column("schema_version", sa.Text, primary_key=True),
        sa.Column("use", sa.Text, primary_key=True),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("use IN ('produced', 'consumed')", name="ck_schema_version_use"),
        schema=schema,
    )
    publish_view(op, schema, VIEW, f"SELECT event_type, schema_version, use, last_seen_at "
                                   f"FROM {schema}.{TABLE}")


def drop_schema_version_use_v1(op: Any, schema: str) -> None:
    drop_view(op, schema, VIEW)
    op.drop_table(TABLE, schema=schema)


async def write_last_seen(engine: AsyncEngine, schema: str,
                          use: SchemaVersionUse = SCHEMA_USE) -> int:
    """Writes the last uses counted since the previous write; on failure they are counted
    again with the next (the newer of the two kept)."""
    taken = use.take_last_seen()
    if not taken:
        return 0
    rows = [{"event_type": e, "schema_version": v, "use": u, "at": at}
            for (e, v, u), at in taken.items()]
    statement = text(
        f"INSERT INTO {schema}.{TABLE} AS t "
        "(event_type, schema_version, use, last_seen_at) "
        "VALUES (:event_type, :schema_version, :use, :at) "
        "ON CONFLICT (event_type, schema_version, use) DO UPDATE "
        "SET last_seen_at = greatest(t.last_seen_at, excluded.last_seen_at)")
    try:
        async with engine.begin() as conn:
            await conn.execute(statement, rows)
    except BaseException:
        for key, at in taken.items():
            newer: datetime = max(at, use.last_seen.get(key, at))
            use.last_seen[key] = newer
        raise
    return len(rows)

