"""After a saga ends, its payment token in the clear is nowhere outside the gateway: in no table
of any schema, no record of any topic (dead-letter topics included), no log line, no trace file
and nothing sagactl prints; pedidos sealed it for pagos, and pagos dropped its sealed copy once
the payment was final.

Why it reads the database, the topics and the files under .local rather than only the public
interfaces: the guarantee is about what is stored and carried, which no HTTP answer shows. The
token is unique to this test (the fake gateway approves any ``tok_…``), so finding it anywhere
can only be a leak of this saga's token; and the gateway's own ledger must hold it, which shows
pagos did open it and that the search looks for the right text.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from saga_contracts import sealing
from saga_contracts.topics import ALL_TOPICS
from saga_harness import config, db, stack
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.kafka import partitions_of
from saga_harness.waiting import wait_for


async def _tables_holding(text: str) -> list[str]:
    """Every base table of every schema but PostgreSQL's own whose rows, as text, hold
    ``text`` (read as the admin role, which reads every schema)."""
    tables = await db.fetch(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_type = 'BASE TABLE' "
        "AND table_schema NOT IN ('pg_catalog', 'information_schema') "
        "AND table_schema NOT LIKE 'pg_toast%'")
    assert {"pedidos", "inventario", "pagos"} <= {t["table_schema"] for t in tables}
    found = []
    for t in tables:
        name = f'"{t["table_schema"]}"."{t["table_name"]}"'
        if await db.fetchval(f"SELECT count(*) FROM {name} AS r WHERE strpos(r::text, $1) > 0",
                             text):
            found.append(name)
    return found


async def _records_holding(text: str) -> tuple[list[str], int]:
    """The topics (dead-letter topics included) with a record whose key, value or headers hold
    ``text``, read from the beginning to their end now; and how many records were read."""
    needle = text.encode()
    found: set[str] = set()
    read = 0
    consumer = AIOKafkaConsumer(**config.kafka_client(), enable_auto_commit=False,
                                group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for topic in ALL_TOPICS
               for p in await partitions_of(topic)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        deadline = time.monotonic() + 120
        for tp in tps:
            while await consumer.position(tp) < ends[tp]:
                assert time.monotonic() < deadline, f"{tp} not read to its end in time"
                batch = await consumer.getmany(tp, timeout_ms=1000)
                for record in batch.get(tp, []):
                    read += 1
                    parts = [record.key or b"", record.value or b"",
                             *(v or b"" for _, v in record.headers or [])]
                    if any(needle in part for part in parts):
                        found.add(tp.topic)
    finally:
        await consumer.stop()
    return sorted(found), read


def _files_holding(folder: Path, text: str) -> list[str]:
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        with contextlib.suppress(FileNotFoundError):
            if text.encode() in path.read_bytes():
                found.append(str(path))
    return found


def _sagactl(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "sagactl.cli", *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


async def test_a_sagas_token_is_nowhere_in_the_clear_once_it_ends(saga: Saga,
                                                                  traced: Path) -> None:
    token = f"tok_visa_sealed_{uuid.uuid4().hex}"
    sku = new_sku()
    await saga.set_stock(sku, 3)
    placed = await saga.place(order_body([(sku, 1)], token=token))
    order = await saga.wait_status(placed["order_id"], "COMPLETADA", timeout=30)
    assert order["charge_id"]
    await saga.wait_payment_settled(placed["saga_id"])

    # The token left pedidos sealed, and reached the gateway in the clear: pagos opened it.
    sealed = await db.fetchval(
        "SELECT payload->'payload'->'payment_method'->>'token' FROM pedidos.outbox "
        "WHERE saga_id = $1 AND event_type = 'OrdenSolicitada'", placed["saga_id"])
    assert sealed is not None and sealing.is_sealed(sealed) and token not in sealed
    with contextlib.closing(sqlite3.connect(stack.STATE / "gateway" / "ledger.sqlite3")) as ledger:
        sources = [row[0] for row in ledger.execute(
            "SELECT source FROM charges WHERE idempotency_key = ?",
            (f"charge-{placed['saga_id']}",))]
    assert sources == [token], "the gateway was charged with the token pagos opened"

    # pagos keeps no copy once the payment is final, sealed or not.
    assert await db.fetchval("SELECT payment_token FROM pagos.payments WHERE saga_id = $1",
                             placed["saga_id"]) is None

    assert await _tables_holding(token) == []
    topics, read = await _records_holding(token)
    assert topics == [] and read > 0
    # The saga's spans were written (the search would find a leak in them), and hold no token.
    async def spans() -> int:
        return _saga_spans(traced, placed["saga_id"])
    await wait_for(spans, lambda n: n > 0, timeout=15, what="the saga's spans exported")
    assert _files_holding(stack.STATE / "traces", token) == []
    assert _files_holding(stack.STATE / "logs", token) == []
    for args in (("timeline", placed["saga_id"]), ("dlq", "--errors", "--limit", "200"),
                 ("sagas", "--limit", "500")):
        assert token not in _sagactl(*args), args


def _saga_spans(folder: Path, saga_id: str) -> int:
    count = 0
    for path in folder.glob("*.jsonl"):
        with contextlib.suppress(FileNotFoundError):
            for line in path.read_text().splitlines():
                if line and json.loads(line)["attributes"].get("saga.id") == saga_id:
                    count += 1
    return count
