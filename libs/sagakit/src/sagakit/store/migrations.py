"""DDL of the messaging tables, for the services' Alembic migrations.

Each function is frozen once released: a later change to these tables is a new function, called
by a new migration, so an old migration always builds the same tables.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


def create_messaging_tables_v1(op: Any, schema: str) -> None:
    op.create_table(
        "outbox",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("message_id", sa.Uuid, nullable=False),
        sa.Column("saga_id", sa.Text, nullable=False),
        sa.Column("topic", sa.Text, nullable=False),
        sa.Column("event_type", sa.Text, nullable=False),
        sa.Column("schema_version", sa.Text, nullable=False),
        sa.Column("payload", postgresql.JSONB, nullable=False),
        sa.Column("headers", postgresql.JSONB, nullable=False),
        sa.Column("traceparent", sa.Text),
        sa.Column("status", sa.Text, nullable=False, server_default="pending"),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.Column("published_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("status IN ('pending', 'published', 'failed')", name="status"),
        sa.UniqueConstraint("message_id"),
        schema=schema,
    )
    # The relay reads pending rows in commit order; the partial index stays small.
    op.create_index("ix_outbox_pending", "outbox", ["id"], schema=schema,
                    postgresql_where=sa.text("status = 'pending'"))
    op.create_index("ix_outbox_published_at", "outbox", ["published_at"], schema=schema,
                    postgresql_where=sa.text("status = 'published'"))
    op.create_index("ix_outbox_saga_id", "outbox", ["saga_id"], schema=schema)
    op.create_table(
        "processed_messages",
        sa.Column("message_id", sa.Text, primary_key=True),
        sa.Column("event_type", sa.Text, nullable=False),
        sa.Column("saga_id", sa.Text),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.CheckConstraint("status IN ('processed', 'dead_lettered')", name="status"),
        schema=schema,
    )
    op.create_index("ix_processed_messages_processed_at", "processed_messages", ["processed_at"],
                    schema=schema)


def create_messaging_indexes_v2(op: Any, schema: str) -> None:
    """Partial indexes for the monitoring queries, which otherwise scan the whole table (the
    outbox keeps published rows for days) every few seconds, even on an idle stack."""
    op.create_index("ix_outbox_failed", "outbox", ["id"], schema=schema,
                    postgresql_where=sa.text("status = 'failed'"))
    op.create_index("ix_processed_messages_dead_lettered", "processed_messages", ["event_type"],
                    schema=schema, postgresql_where=sa.text("status = 'dead_lettered'"))


def drop_messaging_indexes_v2(op: Any, schema: str) -> None:
    op.drop_index("ix_processed_messages_dead_lettered", "processed_messages", schema=schema)
    op.drop_index("ix_outbox_failed", "outbox", schema=schema)


def create_relay_lease_v3(op: Any, schema: str) -> None:
    """The outbox relay's lead (``sagakit.outbox.leadership``): one row per outbox, taken by one
    relay instance at a time until ``expires_at`` (the database's clock), renewed while it
    publishes; ``epoch`` grows with every taking and fences whatever a former holder still
    sends. Starts with no row: the first relay to try inserts it."""
    op.create_table(
        "outbox_relay_lease",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("holder_pid", sa.Integer),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        schema=schema,
    )


def drop_relay_lease_v3(op: Any, schema: str) -> None:
    op.drop_table("outbox_relay_lease", schema=schema)


def drop_messaging_tables_v1(op: Any, schema: str) -> None:
    op.drop_table("processed_messages", schema=schema)
    op.drop_table("outbox", schema=schema)
