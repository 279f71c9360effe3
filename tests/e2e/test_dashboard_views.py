"""The dashboard's SQL panels run, as the grafana_reader login their data source uses, against
the stack's database: every view they read is published to that role, and the queries are
valid SQL for it."""

from __future__ import annotations

import asyncpg
import pytest

from saga_harness import config
from saga_harness.scripts import load

pytestmark = pytest.mark.usefixtures("running_stack")

dashboard = load("deploy/tests/test_dashboard.py", "dashboard_test")


async def test_every_sql_panel_runs_as_grafana_reader() -> None:
    queries = dashboard.sql_queries()
    assert queries
    conn = await asyncpg.connect(config.reader_dsn("grafana"))
    try:
        for title, sql in queries.items():
            try:
                await conn.fetch(sql)
            except asyncpg.PostgresError as exc:  # a view it may not read, or bad SQL
                raise AssertionError(f"{title}: {exc}") from exc
        # And nothing else: the role reads the views, not the services' tables.
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetch("SELECT 1 FROM pagos.payments LIMIT 1")
    finally:
        await conn.close()
