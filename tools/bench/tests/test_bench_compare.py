"""The comparison end to end, in its smallest form (the bench's smoke): this stack and every
DBOS shape driven by the same load generator, each observed from its own rows and processes,
every headline figure measured."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
import pytest

from bench import compare, load, run, systems
from bench.common import EXTRA_ROOTS, admin_dsn
from saga_harness.identity import StackAuth

pytestmark = pytest.mark.stack


async def test_every_system_is_measured_side_by_side_from_its_own_rows() -> None:
    load.authenticate()
    skus = [f"BENCH-SMOKE-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
    async with httpx.AsyncClient(auth=StackAuth()) as http:
        for sku in skus:
            await load.set_stock(http, sku, 1_000_000)
    compared = [systems.this_stack(), *(systems.peer(name) for name in systems.PEER_SHAPES)]
    result = await compare.compare(compared, rounds=1, skus=skus, seconds=2, warm=(5, 1),
                                   closed=[2], closed_max=2, refinements=0)
    assert [b["system"] for b in result["blocks"]] == ["this", *systems.PEER_SHAPES]
    assert not EXTRA_ROOTS, "a peer's processes are counted only during its block"
    for b in result["blocks"]:
        light = b["open_loop"][0]
        assert light["accepted"] == 20 and light["unfinished"] == 0, b["system"]
        assert light["outcomes"] == {"COMPLETADA": 20}, b["system"]
        assert light["latency"]["p50_ms"] > 0
        # Each system's CPU is its own parts': the peer's processes, never Kafka's.
        parts = set(b["closed_loop"][0]["cpu_ms_per_saga"])
        assert parts == ({"postgres", "gateway", "dbos"} if b["system"] != "this" else
                         {"postgres", "kafka", "gateway", "pedidos", "inventario", "pagos"})
        assert light["commits_per_saga"] and light["wal_bytes_per_saga"]
    head = run.headline({"floor_one_saga_ms": 6.5, "comparison": result})
    assert set(head["systems"]) == {"this", *systems.PEER_SHAPES}
    for name, m in head["systems"].items():
        for figure in ("p50_ms_at_10", "p99_ms_at_50", "sagas_per_s_p99_under_1s",
                       "cpu_ms_per_saga_saturated"):
            assert isinstance(m[figure], float) and m[figure] > 0, (name, figure)
    # The peer's orders were its own: none reached this stack's tables.
    conn = await asyncpg.connect(admin_dsn())
    try:
        peer_ids = [r[0] for r in await conn.fetch(
            "SELECT order_id FROM peer_dbos.orders ORDER BY created_at DESC LIMIT 20")]
        assert await conn.fetchval("SELECT count(*) FROM pedidos.orders "
                                   "WHERE order_id = ANY($1::uuid[])", peer_ids) == 0
    finally:
        await conn.close()
