"""The floor: a raw saga-step transaction in PostgreSQL and a raw Kafka hop, where the benchmark runs."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench.common import admin_dsn, config, cpu_seconds_between, sample_cpu, summary_ms

SCHEMA = "benchraw"

# The paced figures leave the machine idle this long before each step or hop, as every step
# of a saga at low rates finds it: on a virtual machine an idle vCPU may halt (cpuidle haltpoll, no
# polling) and the first round trip after a pause pays its wake-up — a SELECT 1 takes 0.07 ms
# back to back and 0.44 ms after 5 ms or more of quiet.
PACE_S = 0.02


class CpuMeter:
    """CPU spent by one part of the stack (PostgreSQL, Kafka) and by this process, the client,
    between ``start`` and ``stop``: what the floor's work costs the machine."""

    def __init__(self, part: str) -> None:
        self.part = part

    def start(self) -> None:
        self._parts, self._own = sample_cpu().parts, time.process_time()

    def stop(self) -> float:
        """CPU seconds since ``start``, server and client together."""
        after, own = sample_cpu().parts, time.process_time()
        server = cpu_seconds_between(self._parts[self.part], after[self.part])
        return server + own - self._own


async def _timed(count: int, step: Callable[[int], Awaitable[None]], pause_s: float = 0.0
                 ) -> list[float]:
    """How long each of ``count`` steps took, each after ``pause_s`` of quiet."""
    took = []
    for i in range(count):
        if pause_s:
            await asyncio.sleep(pause_s)
        t = time.perf_counter()
        await step(i)
        took.append(time.perf_counter() - t)
    return took


async def _setup_pg(conn: asyncpg.Connection) -> None:
    await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE; CREATE SCHEMA {SCHEMA};"
                       f"CREATE TABLE {SCHEMA}.state (id int PRIMARY KEY, n bigint);"
                       f"CREATE TABLE {SCHEMA}.inbox (id text PRIMARY KEY, at timestamptz "
                       "DEFAULT now());"
                       f"CREATE TABLE {SCHEMA}.outbox (id bigserial PRIMARY KEY, payload jsonb,"
                       " created_at timestamptz DEFAULT now());"
                       f"INSERT INTO {SCHEMA}.state SELECT g, 0 FROM generate_series(1, 1000) g")


async def _step(conn: asyncpg.Connection, row: int) -> None:
    """What one saga step commits: the inbox row, a state change, an outbox row."""
    async with conn.transaction():
        await conn.execute(f"INSERT INTO {SCHEMA}.inbox (id) VALUES ($1)", str(uuid.uuid4()))
        await conn.execute(f"UPDATE {SCHEMA}.state SET n = n + 1 WHERE id = $1", row)
        await conn.execute(f"INSERT INTO {SCHEMA}.outbox (payload) VALUES ($1)",
                           json.dumps({"k": row}))


async def pg_step(single: int = 500, clients: int = 16, seconds: float = 5.0) -> dict[str, Any]:
    conn = await asyncpg.connect(admin_dsn())
    await _setup_pg(conn)
    latencies = await _timed(single, lambda i: _step(conn, i % 1000 + 1))
    paced = await _timed(single // 2, lambda i: _step(conn, i % 1000 + 1), pause_s=PACE_S)
    await conn.close()

    conns = [await asyncpg.connect(admin_dsn()) for _ in range(clients)]
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker(c: asyncpg.Connection, k: int) -> None:
        nonlocal done
        i = k
        while time.perf_counter() < stop_at:
            await _step(c, i % 1000 + 1)
            i += clients
            done += 1

    meter = CpuMeter("postgres")
    meter.start()
    started = time.perf_counter()
    await asyncio.gather(*(worker(c, k) for k, c in enumerate(conns)))
    elapsed = time.perf_counter() - started
    cpu_s = meter.stop()
    for c in conns:
        await c.close()
    conn = await asyncpg.connect(admin_dsn())
    await conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
    await conn.close()
    return {"single_client": summary_ms(latencies),
            f"rate_{clients}_clients_per_s": round(done / elapsed),
            "single_client_paced": summary_ms(paced),
            # PostgreSQL's CPU and the client's, per transaction, at that rate.
            f"cpu_ms_per_tx_{clients}_clients": round(1000 * cpu_s / max(done, 1), 3)}


async def ensure_topic(name: str, partitions: int = 6) -> None:
    admin = AIOKafkaAdminClient(**config.kafka_client())
    await admin.start()
    try:
        if name not in await admin.list_topics():
            await admin.create_topics([config.scratch_topic(name, partitions)])
    finally:
        await admin.close()


async def kafka_hop(n: int = 500) -> dict[str, Any]:
    """Produce (acks=all) → consume round trip of one small message at a time."""
    topic = "bench-hop"
    await ensure_topic(topic, 1)
    producer = AIOKafkaProducer(**config.kafka_client(), acks="all",
                                enable_idempotence=True, linger_ms=0)
    consumer = AIOKafkaConsumer(**config.kafka_client(), enable_auto_commit=False,
                                fetch_max_wait_ms=10)
    await producer.start()
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    await consumer.seek_to_end(tp)
    await consumer.position(tp)

    async def hop(i: int) -> None:
        await producer.send_and_wait(topic, json.dumps({"i": i}).encode(), partition=0)
        got = False
        while not got:
            batch = await consumer.getmany(tp, timeout_ms=1000)
            got = bool(batch.get(tp))

    try:
        back_to_back = await _timed(n, hop)
        paced = await _timed(n // 2, hop, pause_s=PACE_S)
        concurrent = await _concurrent_hops(producer, consumer, tp, topic)
    finally:
        await producer.stop()
        await consumer.stop()
    return {"produce_to_consume": summary_ms(back_to_back),
            "produce_to_consume_paced": summary_ms(paced), **concurrent}


async def _concurrent_hops(producer: AIOKafkaProducer, consumer: AIOKafkaConsumer,
                           tp: TopicPartition, topic: str, senders: int = 16,
                           seconds: float = 3.0) -> dict[str, Any]:
    """``senders`` producers each sending (acks=all) and waiting, one consumer reading it all,
    as the stack's relays and consumers meet a saturated broker: the broker's CPU and the
    clients', per message."""
    sent = received = 0
    stop_at = time.perf_counter() + seconds

    async def sender(k: int) -> None:
        nonlocal sent
        while time.perf_counter() < stop_at:
            await producer.send_and_wait(topic, json.dumps({"k": k}).encode(), partition=0)
            sent += 1

    async def reader() -> None:
        nonlocal received
        while received < sent or time.perf_counter() < stop_at:
            batch = await consumer.getmany(tp, timeout_ms=200)
            received += len(batch.get(tp, []))

    meter = CpuMeter("kafka")
    meter.start()
    started = time.perf_counter()
    await asyncio.gather(reader(), *(sender(k) for k in range(senders)))
    elapsed = time.perf_counter() - started
    cpu_s = meter.stop()
    return {f"rate_{senders}_senders_per_s": round(received / elapsed),
            f"cpu_ms_per_message_{senders}_senders": round(1000 * cpu_s / max(received, 1), 3)}


def cpu_floor(pg: dict[str, Any], hop: dict[str, Any], cores: int) -> dict[str, Any]:
    """The CPU one saga's 7 transactions and 6 hops cost the machine at saturation, and the
    rate two cores could sustain if a saga cost nothing else: the ceiling any stack doing this
    work on the machine stays under."""
    tx = next(v for k, v in pg.items() if k.startswith("cpu_ms_per_tx_"))
    message = next(v for k, v in hop.items() if k.startswith("cpu_ms_per_message_"))
    per_saga = 7 * tx + 6 * message
    return {"cpu_ms_per_saga": round(per_saga, 2),
            "ceiling_sagas_per_s": round(cores * 1000 / per_saga) if per_saga else None}


def floor_ms(pg: dict[str, Any], hop: dict[str, Any], *, paced: bool = False) -> float:
    """One saga's floor: 7 saga-step transactions and 6 Kafka hops at their p50, back to back
    or (``paced``) each after a pause, as a saga's steps start at low arrival rates."""
    pg_key, hop_key = (("single_client_paced", "produce_to_consume_paced") if paced
                       else ("single_client", "produce_to_consume"))
    return round(7 * pg[pg_key]["p50_ms"] + 6 * hop[hop_key]["p50_ms"], 2)


def fastest(measurements: list[dict[str, Any]]) -> dict[str, Any]:
    """Of the same baselines measured at different times of a run, the one with the lowest
    back-to-back p50 (PostgreSQL's and Kafka's each chosen on their own).

    The floor is what the machine can do. A VM that slows down for a while (once both
    baselines 2× slower after the warm-up than measured by hand before and after the run) makes a
    floor measured in that while slower, and every saga figure a smaller multiple of it: the
    goal judged against a floor the machine does not have. The fastest measurement is the
    conservative one."""
    pg = min((m["pg"] for m in measurements), key=lambda b: b["single_client"]["p50_ms"])
    hop = min((m["hop"] for m in measurements),
              key=lambda b: b["produce_to_consume"]["p50_ms"])
    return {"pg": pg, "hop": hop}
