"""Fixtures of sagakit's integration tests against the stack's PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from saga_harness import config


@pytest.fixture
async def fresh_schema(running_stack: None) -> AsyncIterator[str]:
    """An empty schema of the test's own, dropped with whatever the test made in it."""
    schema = f"scratch_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
        yield schema
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await conn.close()
