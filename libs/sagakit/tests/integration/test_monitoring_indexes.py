"""The gauges run every few seconds for the life of the stack, over tables that keep days of
rows: each of their filters must have an index, or an idle stack keeps scanning its outbox."""

from __future__ import annotations

import asyncpg
import pytest

from saga_harness import config

SERVICES = ["pedidos", "inventario", "pagos"]
# (table, the filter a gauge or the relay uses)
FILTERS = [("outbox", "status = 'pending'::text"), ("outbox", "status = 'failed'::text"),
           ("processed_messages", "status = 'dead_lettered'::text")]


@pytest.mark.parametrize("service", SERVICES)
async def test_every_monitoring_filter_has_a_partial_index(running_stack: None,
                                                           service: str) -> None:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        for table, predicate in FILTERS:
            await conn.execute("SET enable_seqscan = off")
            plan = "\n".join(r[0] for r in await conn.fetch(
                f"EXPLAIN SELECT count(*) FROM {service}.{table} WHERE {predicate}"))
            # Neither a scan of the table nor of a whole index filtered row by row.
            assert "Seq Scan" not in plan and "Filter" not in plan, (
                f"{service}.{table} WHERE {predicate}:\n{plan}")
    finally:
        await conn.close()


async def test_pagos_payments_needing_a_person_have_a_partial_index(running_stack: None) -> None:
    """saga_payments_needing_action counts them every few seconds (pagos.adapters.resolutions)."""
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in await conn.fetch(
            "EXPLAIN SELECT count(*) FROM pagos.payments "
            "WHERE manual_refund_required OR status = 'REFUND_FAILED'"))
        assert "Seq Scan" not in plan and "Filter" not in plan, plan
    finally:
        await conn.close()
