"""DDL of the published read views, for the services' Alembic migrations
(docs/operations.md#the-read-contract).

A service publishes what others may read of its data as views in a schema of its own,
``<service>_read``, each named with its version (``sagas_v1``). The views belong to the schema's
owner role and run with its rights, so a reader needs nothing but ``SELECT`` on them: the
group role ``<service>_reader`` gets exactly that (and ``USAGE`` on the schema), never a base
table. A view's columns never change: another shape is a new view (``_v2``), and the old one
stays until its readers moved (docs/operations.md, "The read contract").

As with ``sagakit.store.migrations``, each function is frozen once released: a later change is
a new function called by a new migration.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


def read_schema(service: str) -> str:
    return f"{service}_read"


def reader_role(service: str) -> str:
    return f"{service}_reader"


def create_read_schema_v1(op: Any, service: str) -> None:
    """The service's read schema, unless the provisioning made it already (it does, owned by
    the service's owner role, which then needs no right to create schemas), and its readers'
    ``USAGE`` on it when their role exists (the provisioning makes it; a database without it
    publishes to nobody)."""
    schema, reader = read_schema(service), reader_role(service)
    op.execute(f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_namespace WHERE nspname = "
               f"'{schema}') THEN CREATE SCHEMA {schema}; END IF; "
               f"IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{reader}') THEN "
               f"GRANT USAGE ON SCHEMA {schema} TO {reader}; END IF; END $$")


def publish_view(op: Any, service: str, name: str, select: str) -> None:
    """``<service>_read.<name>`` as ``select``, readable by ``<service>_reader``."""
    schema, reader = read_schema(service), reader_role(service)
    op.execute(f"CREATE VIEW {schema}.{name} AS {select}")
    op.execute(f"DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{reader}') THEN "
               f"GRANT SELECT ON {schema}.{name} TO {reader}; END IF; END $$")


def drop_view(op: Any, service: str, name: str) -> None:
    op.execute(f"DROP VIEW IF EXISTS {read_schema(service)}.{name}")


def create_operator_actions_v1(op: Any, schema: str) -> None:
    """What operators did through the service's API (who, when, what, on which saga and
    object, why), written in the same transaction as the action. Append-only: the service's
    runtime role may insert, never change or delete (an audit trail, as saga_audit)."""
    op.create_table(
        "operator_actions",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.Column("operator", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("saga_id", sa.Text),
        sa.Column("target", sa.Text),
        sa.Column("reason", sa.Text),
        sa.Column("detail", postgresql.JSONB, nullable=False, server_default="{}"),
        schema=schema,
    )
    op.create_index("ix_operator_actions_saga_id", "operator_actions", ["saga_id", "id"],
                    schema=schema)
    op.execute(f"DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{schema}_app') "
               f"THEN REVOKE UPDATE, DELETE, TRUNCATE ON {schema}.operator_actions "
               f"FROM {schema}_app; END IF; END $$")


def drop_operator_actions_v1(op: Any, schema: str) -> None:
    op.drop_table("operator_actions", schema=schema)


# The views every service publishes of its messaging tables (sagakit.store.migrations) and of
# its operator actions. No payload and no headers: an event's payload may hold what its
# schema declares sensitive (a sealed payment token, an address).
MESSAGING_VIEWS_V1 = {
    "outbox_v1": """SELECT id, message_id, saga_id, event_type, schema_version, topic, status,
       attempts, last_error, created_at, published_at,
       split_part(traceparent, '-', 2) AS trace_id
FROM {schema}.outbox""",
    "outbox_backlog_v1": """SELECT topic, count(*) AS unpublished,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       min(created_at) AS oldest_created_at,
       extract(epoch FROM now() - min(created_at))::double precision AS oldest_age_s
FROM {schema}.outbox WHERE status <> 'published' GROUP BY topic""",
    "inbox_v1": """SELECT message_id, saga_id, event_type, status, processed_at
FROM {schema}.processed_messages""",
    "operator_actions_v1": """SELECT id, at, operator, action, saga_id, target, reason, detail
FROM {schema}.operator_actions""",
}


def create_messaging_views_v1(op: Any, service: str) -> None:
    """The read schema and the views of ``MESSAGING_VIEWS_V1`` over the service's schema (named
    as the service); the operator actions' table must exist."""
    create_read_schema_v1(op, service)
    for name, select in MESSAGING_VIEWS_V1.items():
        publish_view(op, service, name, select.format(schema=service))


def drop_messaging_views_v1(op: Any, service: str) -> None:
    for name in reversed(MESSAGING_VIEWS_V1):
        drop_view(op, service, name)
