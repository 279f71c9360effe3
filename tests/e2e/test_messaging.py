"""Messaging guarantees seen from outside: duplicates, dead letters, a consumer that goes on.

It reads inventario's inbox, stock checks and outbox: how a duplicate or an invalid message was
handled has no HTTP view."""

from __future__ import annotations

import json
import uuid

from saga_harness import db, sealing
from saga_harness.clients import Saga, new_sku
from saga_harness.kafka import TopicReader, envelope, headers_of, produce
from saga_harness.waiting import wait_for


def _orden_solicitada(sku: str, qty: int) -> dict:
    saga_id, order_id = str(uuid.uuid4()), str(uuid.uuid4())
    charge = sealing.charge(saga_id=saga_id, order_id=order_id, amount=f"{qty}.00",
                            customer_id="c-dup")
    event = envelope("OrdenSolicitada", {
        "order_id": order_id, "customer_id": "c-dup",
        "items": [{"sku": sku, "quantity": qty, "price": "1.00"}], "total_amount": f"{qty}.00",
        "currency": "USD",
        "shipping_address": {"street": "s", "city": "c", "country": "PE", "postal_code": "1"},
        "payment_method": {"type": "credit_card",
                           "token": sealing.stack_sealed("tok_visa", charge)}},
        saga_id=saga_id, source="pedidos")
    # As pedidos names the customer: pagos opens the token only for the customer it is sealed for.
    event["metadata"]["user_id"] = "c-dup"
    return event


async def _effects(saga_id: str, message_id: str) -> tuple[int, int, int]:
    inbox = await db.fetchval("SELECT count(*) FROM inventario.processed_messages "
                              "WHERE message_id = $1", message_id)
    checks = await db.fetchval("SELECT count(*) FROM inventario.stock_checks WHERE saga_id = $1",
                               saga_id)
    outcomes = await db.fetchval("SELECT count(*) FROM inventario.outbox WHERE saga_id = $1 AND "
                                 "event_type IN ('StockVerificado', 'StockNoDisponible')",
                                 saga_id)
    return int(inbox), int(checks), int(outcomes)


async def test_same_message_three_times_has_one_effect(saga: Saga) -> None:
    """docs/standard.md#idempotent-consumers against the real consumer: one inbox row, one effect,
    one outgoing event."""
    sku = new_sku()
    await saga.set_stock(sku, 10, price="1.00")
    event = _orden_solicitada(sku, 2)
    async with TopicReader("inventory-events") as out:
        await produce("order-events", event, times=3)
        await out.wait_for(lambda r: headers_of(r).get("X-Saga-ID") == event["saga_id"])
        # A later message of the same saga (same partition) proves all three were consumed.
        marker = envelope("OrdenCancelada", {"order_id": event["payload"]["order_id"],
                                             "status": "CANCELADA_POR_USUARIO",
                                             "reason": "cancelada_por_usuario"},
                          saga_id=event["saga_id"], source="pedidos")
        await produce("order-events", marker)
        await wait_for(lambda: db.fetchval(
            "SELECT count(*) FROM inventario.processed_messages WHERE message_id = $1",
            marker["message_id"]), lambda n: n == 1, timeout=10, what="marker consumed")
    # One inbox row for the message, one validation, one outcome event.
    assert await _effects(event["saga_id"], event["message_id"]) == (1, 1, 1)


async def _dead_letter_of(reader: TopicReader, value: bytes | dict, key: str) -> dict:
    await produce("order-events", value, key=key)
    record = await reader.wait_for(lambda r: (r.key or b"").decode() == key)
    return {"headers": headers_of(record), "body": json.loads(record.value)}


async def test_poison_messages_go_to_the_dead_letter_topic_and_the_consumer_goes_on(
        saga: Saga) -> None:
    async with TopicReader("inventario-dlq") as dlq:
        not_json = await _dead_letter_of(dlq, b"\x00\xffnot json at all", str(uuid.uuid4()))
        invalid = envelope("OrdenSolicitada", {"order_id": "not-a-uuid"}, source="pedidos")
        schema_invalid = await _dead_letter_of(dlq, invalid, invalid["saga_id"])
        unknown = envelope("PedidoTeletransportado", {"x": 1}, source="pedidos")
        unknown_type = await _dead_letter_of(dlq, unknown, unknown["saga_id"])

    assert not_json["body"]["reason"] == "undecodable"
    assert not_json["body"]["original"]["value"]["encoding"] == "base64"
    assert schema_invalid["body"]["reason"] == "schema_invalid"
    assert "order_id" in schema_invalid["body"]["attempts"][0]["error"]
    assert unknown_type["body"]["reason"] == "unknown_event_type"
    for dead in (not_json, schema_invalid, unknown_type):
        body = dead["body"]
        assert body["consumer_service"] == "inventario"
        assert body["attempt_count"] == len(body["attempts"]) >= 1
        assert all({"attempt", "at", "error"} <= set(a) for a in body["attempts"])
        assert "Traceback" in body["last_traceback"]
        assert body["original"]["topic"] == "order-events"
        assert dead["headers"]["X-DLQ-Original-Topic"] == "order-events"
        assert dead["headers"]["X-DLQ-Error-Class"] == body["reason"]
    assert json.loads(schema_invalid["body"]["original"]["value"]["data"]) == invalid

    # The consumer is still consuming: a valid order after the poison is validated.
    sku = new_sku()
    await saga.set_stock(sku, 1, price="1.00")
    good = _orden_solicitada(sku, 1)
    await produce("order-events", good)
    await wait_for(lambda: db.fetchval("SELECT result FROM inventario.stock_checks "
                                       "WHERE saga_id = $1", good["saga_id"]),
                   lambda r: r == "verified", timeout=10, what="valid message processed")
