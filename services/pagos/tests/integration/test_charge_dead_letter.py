"""A charge the gateway never answered, parked in pagos' dead-letter topic and replayed with
``sagactl replay``, against real PostgreSQL (a scratch copy of pagos' tables) and Kafka (a
scratch topic).

pagos writes its letter in the format every consumer writes (``sagakit.dead_letters``), with the
StockVerificado that asked for the charge as the original. Replayed, that request reaches
pagos' consumer as a valid event under a new message id, addressed to pagos, and the charge is
made due again under the same idempotency key — unless something has decided the payment since
(a cancellation): then nothing is charged."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pagos.config import PagosSettings
from pagos.domain.payment import Outcome
from pagos.entrypoints.messages import make_on_stock_verificado
from pagos.usecases.charge_payment import charge_key
from pagos.usecases.gateway_worker import GatewayWorker
from pagos.usecases.ports import ChargeResult, RefundResult
from saga_contracts import replay_signature
from saga_contracts.events.inventory import StockVerificado
from saga_harness import config, db
from saga_harness import events as ev
from saga_harness import payments as pay
from saga_harness.kafka import TopicReader
from saga_harness.waiting import wait_for
from sagakit import jsonio
from sagakit.consumer import EventConsumer, Origin, RawRecord, Subscription
from sagakit.message import Message
from sagakit.operations import replay
from sagakit.settings import KafkaClientSettings, MessagingSettings
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "chargedlqtest"
# The replay's own topic here: inventory-events is the running stack's.
TOPIC = "charge-dlq-test-replays"


class _Gateway:
    """Unavailable to every charge until ``approve`` is set; records the idempotency keys."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.approve = False

    async def charge(self, *, idempotency_key: str, saga_id: str, **_: Any) -> ChargeResult:
        self.keys.append(idempotency_key)
        if self.approve:
            return ChargeResult(Outcome.APPROVED, charge_id=f"ch_{saga_id[:8]}")
        return ChargeResult(Outcome.UNAVAILABLE, detail="gateway timed out")

    async def refund(self, *, charge_id: str, **_: Any) -> RefundResult:
        return RefundResult(True, refund_id=f"re_{charge_id}")

    async def close(self) -> None:
        return None


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    admin = AIOKafkaAdminClient(**config.kafka_client())
    await admin.start()
    try:
        if TOPIC not in await admin.list_topics():
            await admin.create_topics([config.scratch_topic(TOPIC, 1)])
    finally:
        await admin.close()
    async with db.scratch_copy(SCHEMA, "pagos", ("payments", "outbox", "processed_messages")) as copy:
        yield copy


@contextlib.asynccontextmanager
async def _worker(engine: AsyncEngine, tables: MessagingTables,
                  gateway: _Gateway) -> AsyncIterator[GatewayWorker]:
    settings = PagosSettings(charge_retry_schedule_s=(0.05, 0.05), worker_concurrency=2,
                             gateway_timeout_s=5, worker_poll_interval_s=0.2)
    worker = pay.worker(engine, tables, gateway, settings)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield worker
    finally:
        stop.set()
        worker.kick()
        await asyncio.wait_for(task, 10)


async def _payment(engine: AsyncEngine, saga_id: str) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(text(
            f"SELECT status, charge_id, payment_token, trigger FROM {SCHEMA}.payments "
            "WHERE saga_id = :s"), {"s": saga_id})).first()


async def _dead_letters(engine: AsyncEngine, saga_id: str) -> list[Any]:
    async with engine.connect() as conn:
        return list((await conn.execute(text(
            f"SELECT message_id::text AS id, payload, headers FROM {SCHEMA}.outbox "
            "WHERE topic = 'pagos-dlq' AND saga_id = :s ORDER BY id"), {"s": saga_id})).all())


async def _emitted(engine: AsyncEngine, saga_id: str) -> list[str]:
    async with engine.connect() as conn:
        return list((await conn.execute(text(
            f"SELECT event_type FROM {SCHEMA}.outbox WHERE saga_id = :s AND topic <> 'pagos-dlq' "
            "ORDER BY id"), {"s": saga_id})).scalars().all())


async def _charge_given_up(engine: AsyncEngine, tables: MessagingTables, worker: GatewayWorker,
                           event: Message[StockVerificado]) -> Any:
    """StockVerificado handled as the consumer handles it; the gateway never answers; the
    letter pagos writes when it gives up."""
    async with UnitOfWork(engine, tables, "pagos") as uow:
        uow.claim(event.message_id, event.event_type, event.saga_id)
        await make_on_stock_verificado(worker)(uow, event)
    await wait_for(lambda: _payment(engine, event.saga_id),
                   lambda r: r.status == "CHARGE_FAILED", timeout=15,
                   what="the charge given up on")
    [letter] = await wait_for(lambda: _dead_letters(engine, event.saga_id),
                              lambda rows: len(rows) == 1, timeout=5, what="the dead letter")
    return letter


# The operator's key, which the consumer below believes (as the stack's services believe theirs).
OPERATOR = Ed25519PrivateKey.generate()


async def _through_kafka(plan: replay.Replay) -> RawRecord:
    """The replay published as ``sagactl replay`` publishes it (to the scratch topic, signed by
    the operator for it), and the record as pagos' consumer would fetch it."""
    async with TopicReader(TOPIC) as reader:
        await replay.publish(replay.signed(replace(plan, topic=TOPIC), OPERATOR),
                             KafkaClientSettings(**config.kafka_fields()))
        record = await reader.wait_for(
            lambda r: dict(r.headers or []).get("X-Message-ID") ==
            plan.value["message_id"].encode())
    return RawRecord(record.topic, record.partition, record.offset, record.key, record.value,
                     list(record.headers or []), record.timestamp)


def _consumer(engine: AsyncEngine, tables: MessagingTables,
              worker: GatewayWorker) -> EventConsumer:
    """pagos' consumer loop with pagos' StockVerificado handler (driven record by record:
    never joining the running stack's consumer group), which believes a StockVerificado from
    inventario on the scratch topic as it believes one on inventory-events."""
    return EventConsumer(service="pagos", topics=[TOPIC],
                         subscriptions=[Subscription(StockVerificado,
                                                     make_on_stock_verificado(worker))],
                         uow_factory=lambda **kw: UnitOfWork(engine, tables, "pagos", **kw),
                         settings=MessagingSettings(
                             **config.kafka_fields(),
                             operator_public_keys=replay_signature.public_entry(OPERATOR)),
                         origins={"StockVerificado": Origin(TOPIC, "inventario")})


async def test_a_charge_given_up_on_is_replayed_and_made_under_the_same_key(
        scratch: tuple[AsyncEngine, MessagingTables]) -> None:
    engine, tables = scratch
    gateway = _Gateway()
    event = ev.stock_verificado(str(uuid.uuid4()))
    async with _worker(engine, tables, gateway) as worker:
        letter = await _charge_given_up(engine, tables, worker, event)
        record = letter.payload
        # The format of every dead letter: each attempt with its time and error, the original
        # whole (the token the payment itself keeps apart is back in it).
        assert record["consumer_service"] == "pagos"
        assert record["reason"] == "gateway_retries_exhausted"
        assert record["attempt_count"] == len(record["attempts"]) == 3
        assert all(a["at"] and "gateway timed out" in a["error"] for a in record["attempts"])
        original = record["original"]
        assert original["topic"] == "inventory-events"
        assert original["message_id"] == event.message_id
        assert original["value"]["encoding"] == "utf-8"
        assert jsonio.loads(original["value"]["data"]) == event.envelope.to_dict()
        assert original["headers"]["X-Message-ID"] == event.message_id
        assert letter.headers["X-DLQ-Error-Class"] == "gateway_retries_exhausted"
        kept = (await _payment(engine, event.saga_id)).trigger["event"]
        assert "token" not in kept["payload"]["payment_method"], \
            "the payment keeps the token in its own column only"

        plan = replay.build(replay.claimed_record(record), "pagos", letter.id)
        assert plan.topic == "inventory-events"
        assert plan.headers["X-Replay-For"] == "pagos"
        assert plan.headers["X-Replay-Of"] == event.message_id != plan.value["message_id"]

        gateway.approve = True
        outcome = await _consumer(engine, tables, worker).processor.process(await _through_kafka(plan))
        assert outcome.status == "processed", outcome
        row = await wait_for(lambda: _payment(engine, event.saga_id),
                             lambda r: r.status == "CAPTURED", timeout=15,
                             what="the replayed charge made")
    assert row.charge_id == f"ch_{event.saga_id[:8]}"
    assert set(gateway.keys) == {charge_key(event.saga_id)}, \
        "every call, the replayed one too, under the first call's idempotency key"
    assert await _emitted(engine, event.saga_id) == ["PagoExitoso"]


async def test_a_replay_after_the_payment_was_decided_charges_nothing(
        scratch: tuple[AsyncEngine, MessagingTables]) -> None:
    engine, tables = scratch
    gateway = _Gateway()
    event = ev.stock_verificado(str(uuid.uuid4()))
    async with _worker(engine, tables, gateway) as worker:
        letter = await _charge_given_up(engine, tables, worker, event)
        # The order was cancelled meanwhile, and the unknown charge resolved as not made.
        async with engine.begin() as conn:
            await conn.execute(text(f"UPDATE {SCHEMA}.payments SET status = 'CANCELLED' "
                                    "WHERE saga_id = :s"), {"s": event.saga_id})
        calls = len(gateway.keys)
        gateway.approve = True
        plan = replay.build(replay.claimed_record(letter.payload), "pagos", letter.id)
        outcome = await _consumer(engine, tables, worker).processor.process(await _through_kafka(plan))
        assert outcome.status == "processed", outcome
        # Left CANCELLED, the payment has no work due: no worker will ever call for it.
        assert (await _payment(engine, event.saga_id)).status == "CANCELLED"
    assert len(gateway.keys) == calls, "no charge for a payment decided since"
    assert await _emitted(engine, event.saga_id) == []
