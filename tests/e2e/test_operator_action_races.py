"""Operator actions racing the running saga, each interleaving forced with an explicit barrier:
what an operator does must never make the saga charge a card it would not have charged, nor
leave the audit saying something other than what happened."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from saga_contracts import replay_signature
from saga_harness import config, db
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.config import STATE
from saga_harness.faults import row_locked
from saga_harness.identity import bearer, token
from saga_harness.kafka import TopicReader, envelope, headers_of
from saga_harness.waiting import wait_for
from sagactl import dead_letters, operator_access
from sagakit.operations import replay


@pytest.fixture
async def http(running_stack: None) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def test_a_retry_while_the_stock_answer_is_on_its_way_never_charges_an_order_without_stock(
        saga: Saga, http: httpx.AsyncClient) -> None:
    """The validation step is retried while inventario's first answer (StockNoDisponible) is on
    its way to pedidos, and the product is restocked meanwhile. inventario answers the second
    OrdenSolicitada as its check answered the first: a StockVerificado there would have pagos
    charge the card for an order that ends cancelled (inventario refusing that payment as one
    its check never asked for)."""
    sku, who = new_sku(), f"ops-{uuid.uuid4().hex[:8]}"
    await saga.set_stock(sku, 0)
    # pedidos' consumer cannot commit while this lock is held: every message it handles
    # inserts its inbox row in the statement that moves the saga, and that statement takes the
    # table's lock before it touches a row. Its API (orders, the retry) and relay go on.
    async with row_locked("SELECT 1") as conn:
        await conn.execute("LOCK TABLE pedidos.processed_messages IN EXCLUSIVE MODE")
        placed = await saga.place(order_body([(sku, 1)]))
        saga_id = placed["saga_id"]
        await wait_for(lambda: db.fetchval("SELECT result FROM inventario.stock_checks "
                                           "WHERE saga_id = $1", saga_id),
                       lambda r: r == "unavailable", timeout=15, what="first check: no stock")
        await saga.set_stock(sku, 5)
        retried = await http.post(f"{config.PEDIDOS}/sagas/{saga_id}/retry",
                                  json={"reason": "validation looks stuck"},
                                  headers=bearer(token(who, ("operator",))))
        assert retried.status_code == 202, retried.text
        message_id = retried.json()["message_id"]
        await wait_for(lambda: db.fetchval("SELECT count(*) FROM inventario.processed_messages "
                                           "WHERE message_id = $1", message_id),
                       lambda n: n == 1, timeout=15, what="the retried request handled")
        answers = [r["event_type"] for r in await db.fetch(
            "SELECT event_type FROM inventario.outbox WHERE saga_id = $1 "
            "AND topic = 'inventory-events' ORDER BY id", saga_id)]
        # pagos hears inventory-events as they are published: give it the time a charge takes.
        if "StockVerificado" in answers:
            await wait_for(lambda: saga.payments(saga_id), lambda ps: bool(ps), timeout=15,
                           what="pagos heard the StockVerificado")
    # pedidos takes whichever answer it hears first: StockNoDisponible (CANCELADA_SIN_STOCK), or
    # the PagoExitoso of the second answer's charge, which inventario then refuses to allocate
    # for (its check says unavailable), so the allocation's deadline cancels the order.
    order = await saga.wait_terminal(placed["order_id"], timeout=45)
    # The charge, if one was made, is refunded on the cancellation: wait for that, then count.
    await saga.wait_no_net_charge(saga_id, timeout=30)
    net, charges, refunds = await saga.money_of(saga_id)
    assert charges == 0, (f"an order cancelled for lack of stock was charged {charges} time(s) "
                          f"(refunded {refunds}, net {net}); inventario answered {answers}, the order ended "
                          f"{order['status']}")
    # The retry is answered again, as the check answered first.
    assert answers == ["StockNoDisponible", "StockNoDisponible"], (
        f"inventario answered one stock check twice, differently: {answers}")


async def _letter_of_a_real_record(service: str) -> tuple[str, str]:
    """A dead letter of ``service`` whose original is a real record on order-events (an
    OrdenCancelada for a saga of its own, which only blocks that saga in inventario and marks it
    cancelled in pagos): a replay of it passes every check against the broker. Returns the
    letter's id and the original's message id."""
    original = envelope("OrdenCancelada", {"order_id": str(uuid.uuid4()),
                                           "status": "CANCELADA_POR_USUARIO",
                                           "reason": "cancelada_por_usuario"},
                        source="pedidos")
    value = json.dumps(original)
    producer = AIOKafkaProducer(**config.kafka_client("pedidos"), acks="all")
    await producer.start()
    try:
        sent = await producer.send_and_wait("order-events", value.encode(),
                                            key=original["saga_id"].encode())
    finally:
        await producer.stop()
    letter_id = str(uuid.uuid4())
    await db.execute(
        f"INSERT INTO {service}.outbox (message_id, saga_id, topic, event_type, schema_version, "
        "payload, headers, status) VALUES ($1::uuid, $2, $3, 'OrdenCancelada', '1.0.0', "
        "$4::jsonb, '{}'::jsonb, 'published')", letter_id, original["saga_id"],
        f"{service}-dlq",
        json.dumps({"reason": "retries_exhausted", "error_class": "TimeoutError",
                    "attempts": [{"attempt": 1, "at": "t", "error": "TimeoutError: slow"}],
                    "original": {"topic": "order-events", "partition": sent.partition,
                                 "offset": sent.offset, "key": original["saga_id"],
                                 "value": {"encoding": "utf-8", "data": value},
                                 "headers": {}}}))
    return letter_id, original["message_id"]


async def test_a_letter_archived_while_it_is_being_replayed_is_not_replayed_unrecorded(
        monkeypatch: pytest.MonkeyPatch, running_stack: None) -> None:
    """sagactl reads the letter's state (open), another operator archives it, and sagactl,
    deciding on the state it read, publishes the replay and only then asks the service to
    record it, which refuses (the letter is archived): a replay went out for a letter the
    audit says was put aside, and nothing records that it did. The barrier: the archive lands
    when the replay reads the original from the broker, between sagactl's read of the state
    and its publication."""
    letter_id, original_id = await _letter_of_a_real_record("inventario")
    who = f"ops-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(operator_access, "_token", token(who, ("operator",)))
    read_record = replay.read_record

    async def archived_meanwhile(*args: Any, **kwargs: Any) -> replay.BrokerRecord:
        async with httpx.AsyncClient(timeout=15,
                                     headers=bearer(token("ops-other", ("operator",)))) as h:
            done = await h.post(
                f"{config.INVENTARIO}/operator/dead-letters/{letter_id}/archive",
                json={"reason": "refunded by hand: never replay it"})
        assert done.status_code == 200, done.text
        return await read_record(*args, **kwargs)

    monkeypatch.setattr(replay, "read_record", archived_meanwhile)
    key = replay_signature.load_private_key(
        (STATE / "secrets" / "operator-signing.key").read_bytes())
    replayer = dead_letters.replayer("inventario", lambda: key, operator_access.kafka())
    async with TopicReader("order-events") as topic:
        try:
            outcome: Any = (await replayer.one(letter_id)).as_dict()
        except operator_access.ApiError as exc:
            outcome = f"ApiError {exc}"
        actions = [(r["action"], r["operator"]) for r in await db.fetch(
            "SELECT action, operator FROM inventario.dead_letter_actions "
            "WHERE dead_letter_id = $1::uuid ORDER BY id", letter_id)]
        replays = [r for r in topic.records if headers_of(r).get("X-Replay-Of") == original_id]
        if not replays:
            with contextlib.suppress(AssertionError):
                replays = [await topic.wait_for(
                    lambda r: headers_of(r).get("X-Replay-Of") == original_id, timeout=5)]
    assert not replays, (f"an archived letter was replayed (sagactl: {outcome}); its audit "
                         f"records only {actions}")
    assert actions == [("archived", "ops-other")], actions


async def test_two_operators_replaying_one_letter_publish_one_replay(
        monkeypatch: pytest.MonkeyPatch, running_stack: None) -> None:
    """Two operators replay the same open letter at once (``sagactl replay``, or two group
    replays, which leave alone only letters they read as acted on). The barrier: both have read
    the letter's state (open) before either reads the original from the broker. The first
    claim wins; the second replay goes out under its message id, so the consumer handles the
    original once, and the audit records one replay."""
    letter_id, original_id = await _letter_of_a_real_record("inventario")
    monkeypatch.setattr(operator_access, "_token",
                        token(f"ops-{uuid.uuid4().hex[:8]}", ("operator",)))
    read_record = replay.read_record
    both_read = asyncio.Barrier(2)

    async def after_both_read(*args: Any, **kwargs: Any) -> replay.BrokerRecord:
        await asyncio.wait_for(both_read.wait(), timeout=15)
        return await read_record(*args, **kwargs)

    monkeypatch.setattr(replay, "read_record", after_both_read)
    key = replay_signature.load_private_key(
        (STATE / "secrets" / "operator-signing.key").read_bytes())
    replayer = dead_letters.replayer("inventario", lambda: key, operator_access.kafka())
    async with TopicReader("order-events") as topic:
        outcomes = await asyncio.gather(replayer.one(letter_id), replayer.one(letter_id),
                                        return_exceptions=True)
        await topic.wait_for(lambda r: headers_of(r).get("X-Replay-Of") == original_id)
        with contextlib.suppress(AssertionError):
            await topic.wait_until(lambda rs: sum(
                headers_of(r).get("X-Replay-Of") == original_id for r in rs) >= 2, timeout=5)
        replays = [r for r in topic.records if headers_of(r).get("X-Replay-Of") == original_id]
    actions = [r["action"] for r in await db.fetch(
        "SELECT action FROM inventario.dead_letter_actions WHERE dead_letter_id = $1::uuid "
        "ORDER BY id", letter_id)]
    shown = [o.as_dict()["outcome"] if isinstance(o, replay.Outcome) else repr(o)
             for o in outcomes]
    sent_as = {headers_of(r)["X-Message-ID"] for r in replays}
    assert len(sent_as) == 1, (f"one letter replayed under {len(sent_as)} message ids "
                               f"(outcomes {shown}, recorded {actions})")
    assert actions == ["replayed"], actions
    message_id = sent_as.pop()
    await wait_for(lambda: db.fetchval("SELECT count(*) FROM inventario.processed_messages "
                                       "WHERE message_id = $1", message_id),
                   lambda n: n == 1, timeout=15, what="inventario handled the replay")
