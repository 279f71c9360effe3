"""The messaging tables every service keeps in its own schema: ``outbox``, ``processed_messages``
and ``outbox_relay_lease`` (who publishes the outbox).

The service's migrations create them (see ``sagakit.store.migrations``); these definitions are
what the runtime queries against, bound to the service's schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Integer,
    MetaData,
    Table,
    Text,
    Uuid,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

OUTBOX_PENDING = "pending"
OUTBOX_PUBLISHED = "published"
OUTBOX_FAILED = "failed"

INBOX_PROCESSED = "processed"
INBOX_DEAD_LETTERED = "dead_lettered"


def service_metadata(schema: str) -> MetaData:
    return MetaData(schema=schema, naming_convention=NAMING_CONVENTION)


@dataclass(frozen=True)
class MessagingTables:
    schema: str
    outbox: Table
    processed_messages: Table
    relay_lease: Table

    @property
    def notify_channel(self) -> str:
        return f"outbox_{self.schema}"


def messaging_tables(metadata: MetaData) -> MessagingTables:
    assert metadata.schema, "messaging tables live in the service's own schema"
    outbox = Table(
        "outbox",
        metadata,
        Column("id", BigInteger, primary_key=True, autoincrement=True),
        Column("message_id", Uuid, nullable=False, unique=True),
        Column("saga_id", Text, nullable=False),  # the aggregate root; also the Kafka key
        Column("topic", Text, nullable=False),
        Column("event_type", Text, nullable=False),
        Column("schema_version", Text, nullable=False),
        Column("payload", JSONB, nullable=False),
        Column("headers", JSONB, nullable=False),
        Column("traceparent", Text),
        Column("status", Text, nullable=False, server_default=OUTBOX_PENDING),
        Column("attempts", Integer, nullable=False, server_default="0"),
        Column("last_error", Text),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("published_at", DateTime(timezone=True)),
    )
    processed = Table(
        "processed_messages",
        metadata,
        Column("message_id", Text, primary_key=True),
        Column("event_type", Text, nullable=False),
        Column("saga_id", Text),
        Column("status", Text, nullable=False),
        Column("processed_at", DateTime(timezone=True), nullable=False,
               server_default=func.now()),
    )
    relay_lease = Table(
        "outbox_relay_lease",
        metadata,
        Column("name", Text, primary_key=True),
        Column("holder", Text, nullable=False),
        Column("holder_pid", Integer),
        Column("epoch", BigInteger, nullable=False),
        Column("expires_at", DateTime(timezone=True), nullable=False),
        Column("taken_at", DateTime(timezone=True), nullable=False),
    )
    return MessagingTables(metadata.schema, outbox, processed, relay_lease)


def operator_actions_table(metadata: MetaData) -> Table:
    """What operators did through the service's API, append-only
    (``sagakit.store.read_views.create_operator_actions_v1``)."""
    assert metadata.schema, "operator actions live in the service's own schema"
    return Table(
        "operator_actions",
        metadata,
        Column("id", BigInteger, primary_key=True, autoincrement=True),
        Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("operator", Text, nullable=False),
        Column("action", Text, nullable=False),
        Column("saga_id", Text),
        Column("target", Text),
        Column("reason", Text),
        Column("detail", JSONB, nullable=False, server_default="{}"),
    )
