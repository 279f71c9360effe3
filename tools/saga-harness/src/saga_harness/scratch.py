"""A scratch schema with the messaging tables and a scratch topic, for testing the plumbing
against real PostgreSQL and Kafka outside any service."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiokafka.admin import AIOKafkaAdminClient
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from saga_harness import config
from saga_harness.waiting import wait_for
from sagakit.store.migrations import (
    create_messaging_indexes_v2,
    create_messaging_tables_v1,
    create_relay_lease_v3,
)
from sagakit.store.tables import MessagingTables, messaging_tables, service_metadata


def _create_messaging_tables(conn: Connection, schema: str) -> None:
    op = Operations(MigrationContext.configure(conn))
    create_messaging_tables_v1(op, schema)
    create_messaging_indexes_v2(op, schema)
    create_relay_lease_v3(op, schema)


@contextlib.asynccontextmanager
async def scratch_outbox(schema: str, topic: str, partitions: int, *, fresh_topic: bool = False
                         ) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    metadata = service_metadata(schema)
    tables = messaging_tables(metadata)
    engine = create_async_engine(config.admin_dsn().replace("postgresql://",
                                                            "postgresql+asyncpg://"))
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        await conn.execute(text(f"CREATE SCHEMA {schema}"))
        # The services' own migrations, so the scratch tables have their indexes too.
        await conn.run_sync(_create_messaging_tables, schema)
    admin = AIOKafkaAdminClient(**config.kafka_client())
    await admin.start()
    try:
        if fresh_topic and topic in await admin.list_topics():
            # A fresh topic, so a new consumer group starts from its beginning.
            await admin.delete_topics([topic])
            await wait_for(admin.list_topics, lambda names: topic not in names, timeout=30,
                           what=f"topic {topic} deleted", interval=0.2)
        if topic not in await admin.list_topics():
            await admin.create_topics([config.scratch_topic(topic, partitions)])
    finally:
        await admin.close()
    try:
        yield engine, tables
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        await engine.dispose()
