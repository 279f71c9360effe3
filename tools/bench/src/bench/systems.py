"""The systems `make bench` drives with the same load generator and observers: this stack, and
the same saga on DBOS Transact in each of its shapes (tools/peer-dbos).

A system says where its orders go, which of its rows tell that a saga ended and when (the
database's own timestamps, never the client's polling), how the catalogue is stocked, and
which processes' CPU is its own. PostgreSQL and the fake gateway serve every system; Kafka
and the three services are this stack's alone, the peer's processes the peer's alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import psutil

from bench.common import EXTRA_ROOTS, PARTS
from bench.latencies import TERMINAL, saga_latencies
from peer_dbos.settings import system_schema
from saga_harness import config, replicas

PEER_SCHEMA = "peer_dbos"
PEER_PART = "dbos"
PEER_PORT = int(os.environ.get("BENCH_PEER_PORT", "8040"))

# The peer's shapes, by their name in latest.json (``systems.<name>``), and the style of
# DBOS's API each uses: the synchronous one, and the async one in one process, so that DBOS's
# figure is the better of its two styles.
PEER_SHAPES = {"dbos": "single", "dbos_async": "single", "dbos_per_core": "per_core",
               "dbos_queue": "queue"}
PEER_STYLES = {"dbos_async": "async"}


@dataclass
class System:
    name: str
    urls: list[str]
    # The parts whose CPU a saga of this system costs.
    parts: tuple[str, ...]
    terminal_sql: str = ""
    shape: str | None = None
    peer_settings: dict[str, str] = field(default_factory=dict)

    @property
    def is_peer(self) -> bool:
        return self.shape is not None

    async def latencies(self, conn: asyncpg.Connection, ids: list[str]) -> dict[str, Any]:
        if not self.is_peer:
            return await saga_latencies(conn, ids)
        assert self.shape is not None
        return await peer_latencies(conn, ids, system_schema(self.shape))

    async def ended(self, conn: asyncpg.Connection, ids: list[str]) -> list[asyncpg.Record]:
        """Of ``ids``, those that reached a terminal state: (id, status)."""
        return list(await conn.fetch(self.terminal_sql, ids, list(TERMINAL)))

    async def stock(self, conn: asyncpg.Connection, skus: list[str], quantity: int) -> None:
        """The peer's catalogue: the same products at the same price as this stack's
        (``load.set_stock``), written to its own table."""
        await conn.executemany(
            f"INSERT INTO {PEER_SCHEMA}.products (sku, quantity, price, currency) "
            "VALUES ($1, $2, 9.99, 'USD') ON CONFLICT (sku) DO UPDATE SET quantity = $2",
            [(sku, quantity) for sku in skus])


def this_stack() -> System:
    return System(
        "this", replicas.instance_urls("pedidos"), tuple(PARTS),
        "SELECT saga_id::text, status FROM pedidos.orders WHERE saga_id = ANY($1::uuid[]) "
        "AND status = ANY($2::text[])")


def peer(name: str) -> System:
    return System(
        name, [f"http://127.0.0.1:{PEER_PORT}"], ("postgres", "gateway", PEER_PART),
        f"SELECT order_id::text, status FROM {PEER_SCHEMA}.orders "
        "WHERE order_id = ANY($1::uuid[]) AND status = ANY($2::text[])",
        shape=PEER_SHAPES[name], peer_settings={"style": PEER_STYLES.get(name, "sync")})


async def peer_latencies(conn: asyncpg.Connection, ids: list[str], dbos_schema: str
                         ) -> dict[str, Any]:
    """Workflow created (DBOS's row of it, written when POST /orders started or enqueued it)
    → the order's terminal transaction."""
    from bench.common import summary_ms

    rows = await conn.fetch(
        f"SELECT o.status, extract(epoch FROM o.finished_at - "
        f"to_timestamp(w.created_at / 1000.0)) AS seconds FROM {PEER_SCHEMA}.orders o "
        f"JOIN {dbos_schema}.workflow_status w ON w.workflow_uuid = o.order_id::text "
        "WHERE o.order_id = ANY($1::uuid[])", ids)
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r["status"]] = outcomes.get(r["status"], 0) + 1
    done = [float(r["seconds"]) for r in rows if r["status"] in TERMINAL
            and r["seconds"] is not None]
    return {"latency": summary_ms(done), "outcomes": outcomes}


@contextlib.contextmanager
def running(system: System) -> Iterator[None]:
    """This stack is always up; a peer's shape runs only for its block, its processes counted
    as the part ``dbos`` meanwhile."""
    if not system.is_peer:
        yield
        return
    from peer_dbos.launcher import PeerProcess

    assert system.shape is not None
    key = config.gateway_auth()["Authorization"].removeprefix("Bearer ")
    with PeerProcess(system.shape, database_url=config.admin_dsn(), gateway_secret_key=key,
                     gateway_url=config.GATEWAY, port=PEER_PORT,
                     settings=system.peer_settings) as process:
        EXTRA_ROOTS[PEER_PART] = [psutil.Process(process.pid)]
        try:
            yield
        finally:
            EXTRA_ROOTS.pop(PEER_PART, None)
