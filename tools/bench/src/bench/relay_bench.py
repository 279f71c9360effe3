"""The outbox relay measured against a raw aiokafka producer, same payloads."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from aiokafka import AIOKafkaProducer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from bench.baselines import ensure_topic
from bench.common import admin_dsn, config, summary_ms
from sagakit.outbox.relay import OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.store.outbox_signal import OutboxSignal
from sagakit.store.tables import messaging_tables, service_metadata
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "benchrelay"
TOPIC = "bench-relay"
PAYLOAD = {"order_id": str(uuid.uuid4()), "items": [{"sku": "SKU-1", "quantity": 1}],
           "total_amount": "10.00", "currency": "USD"}


async def relay_vs_raw(n: int = 5000, paced_rate: int = 200, paced_s: float = 5.0,
                       poll_interval_s: float = 0.2) -> dict[str, Any]:
    await ensure_topic(TOPIC)
    metadata = service_metadata(SCHEMA)
    tables = messaging_tables(metadata)
    engine = create_async_engine(admin_dsn().replace("postgresql://", "postgresql+asyncpg://"),
                                 pool_size=20)
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        await conn.execute(text(f"CREATE SCHEMA {SCHEMA}"))
        await conn.run_sync(metadata.create_all)
    settings = MessagingSettings(**config.kafka_fields(),
                                 relay_poll_interval_s=poll_interval_s, relay_batch_size=500)

    # The relay wakes as in a service: from the units of work of its own process.
    signal = OutboxSignal()

    async def write(saga: str) -> None:
        uow = UnitOfWork(engine, tables, "bench", signal=signal)
        async with uow:
            uow.emit_raw(topic=TOPIC, key=saga, event_type="Bench", value=PAYLOAD,
                         headers={"X-Saga-ID": saga})
            await uow.commit()

    # Throughput: a backlog of n rows, then the relay drains it.
    sem = asyncio.Semaphore(16)

    async def bounded(saga: str) -> None:
        async with sem:
            await write(saga)

    await asyncio.gather(*(bounded(str(uuid.uuid4())) for _ in range(n)))
    relay = OutboxRelay(engine, tables, "bench", settings, signal=signal)
    stop = asyncio.Event()
    started = time.perf_counter()
    task = asyncio.create_task(relay.run(stop))
    while relay.published_total < n:  # noqa: ASYNC110 (sampling a counter, not waiting on it)
        await asyncio.sleep(0.01)
    drain_s = time.perf_counter() - started

    # Latency: paced commits while the relay runs (woken in the process, polling as a fallback).
    async with engine.begin() as conn:
        await conn.execute(text(f"TRUNCATE {SCHEMA}.outbox"))
    t0 = time.perf_counter()
    writes = []
    for i in range(int(paced_rate * paced_s)):
        await asyncio.sleep(max(0.0, t0 + i / paced_rate - time.perf_counter()))
        writes.append(asyncio.create_task(write(str(uuid.uuid4()))))
    await asyncio.gather(*writes)
    while True:
        async with engine.connect() as conn:
            pending = (await conn.execute(text(
                f"SELECT count(*) FROM {SCHEMA}.outbox WHERE status = 'pending'"))).scalar()
        if pending == 0:
            break
        await asyncio.sleep(0.05)
    async with engine.connect() as conn:
        lat = [r[0] for r in (await conn.execute(text(
            f"SELECT extract(epoch FROM published_at - created_at) FROM {SCHEMA}.outbox"))).all()]
    stop.set()
    await task
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP SCHEMA {SCHEMA} CASCADE"))
    await engine.dispose()

    # The same payloads through a raw producer (acks=all, idempotent), no database.
    producer = AIOKafkaProducer(**config.kafka_client(), acks="all",
                                enable_idempotence=True, linger_ms=1)
    await producer.start()
    value = json.dumps(PAYLOAD).encode()
    started = time.perf_counter()
    futures = [await producer.send(TOPIC, value, key=str(uuid.uuid4()).encode())
               for _ in range(n)]
    await asyncio.gather(*futures)
    raw_s = time.perf_counter() - started
    raw_lat = []
    t0 = time.perf_counter()
    for i in range(int(paced_rate * paced_s)):
        await asyncio.sleep(max(0.0, t0 + i / paced_rate - time.perf_counter()))
        t = time.perf_counter()
        await producer.send_and_wait(TOPIC, value, key=str(uuid.uuid4()).encode())
        raw_lat.append(time.perf_counter() - t)
    await producer.stop()
    relay_rate, raw_rate = n / drain_s, n / raw_s
    relay_summary = summary_ms([float(x) for x in lat])
    return {
        "events": n,
        "relay_events_per_s": round(relay_rate),
        "raw_producer_events_per_s": round(raw_rate),
        "relay_share_of_raw": round(relay_rate / raw_rate, 2),
        "relay_commit_to_ack": relay_summary,
        "raw_send_to_ack": summary_ms(raw_lat),
        "poll_interval_ms": poll_interval_s * 1000,
        "goal_throughput_met": relay_rate >= raw_rate / 2,
        "goal_p99_met": relay_summary["p99_ms"] <= poll_interval_s * 1000 + 50,
    }
