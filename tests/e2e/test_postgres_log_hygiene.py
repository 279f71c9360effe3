"""PostgreSQL logs slow statements (``log_min_duration_statement``) but never the values bound
to them: a payment token, an address or a password bound to a slow statement would otherwise
sit in its log in the clear."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from saga_harness import config
from saga_harness.waiting import wait_for

pytestmark = pytest.mark.usefixtures("running_stack")

LOG = config.STATE / "logs" / "postgres.log"


async def test_a_logged_statement_shows_no_bound_value() -> None:
    probe = uuid.uuid4().hex  # in the statement's text: shows the statement was logged
    secret = f"tok_visa_logged_{uuid.uuid4().hex}"  # bound to it: must not be
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        # Every statement of this session counts as slow, as any statement can be under load.
        await conn.execute("SET log_min_duration_statement = 0")
        assert await conn.fetchval(f"SELECT $1::text /* {probe} */", secret) == secret
    finally:
        await conn.close()

    async def logged() -> bool:
        return probe in LOG.read_text(errors="replace")

    await wait_for(logged, bool, timeout=10, what="PostgreSQL to log the statement")
    assert secret not in LOG.read_text(errors="replace")
