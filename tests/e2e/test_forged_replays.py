"""A forged ``X-Replay-For`` hides nothing. The header addresses a replayed dead letter to the one
service that gave up on it, and the other services skip the replay, but only when the operator
signed it (``sagactl replay`` does; ``tools/sagactl/tests/test_operator_cli.py`` shows a signed
replay skipped by pedidos). Anyone who can write to a topic can write the header: a record
addressed to pagos without the operator's signature of it is handled by inventario as any
record, and counted in inventario's ``saga_forged_replays_total``.

The records are written for sagas of their own, random ids that no other test and no service
knows: an ``OrdenCancelada`` for such a saga makes inventario block it (``BLOCKED``, so that no
payment ever allocates for it) and pagos mark it cancelled, and nothing else."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saga_contracts import headers as h
from saga_contracts import replay_signature
from saga_contracts.replay_signature import Signed
from saga_harness import config, db, stack
from saga_harness.clients import Saga
from saga_harness.kafka import TopicReader, envelope, headers_of, produce
from saga_harness.waiting import wait_for

Signer = Callable[[Signed], str | None]


def _unsigned(_: Signed) -> str | None:
    return None


def _stranger(signed: Signed) -> str | None:
    """A good signature, by a key that is not the operator's."""
    return replay_signature.sign(Ed25519PrivateKey.generate(), signed)


def _operator_key() -> Ed25519PrivateKey:
    """The key ``sagactl`` signs with: the local stack's, made at its first start."""
    path = stack.STATE / "secrets" / "operator-signing.key"
    return replay_signature.load_private_key(path.read_bytes())


def _operator_for_another_record(signed: Signed) -> str | None:
    """The operator's signature of another record (another saga's replay), moved onto this."""
    other = Signed(signed.replay_for, signed.topic, b"another-saga", b"{}", str(uuid.uuid4()),
                   "another-saga")
    return replay_signature.sign(_operator_key(), other)


def _cancelled(saga_id: str) -> dict[str, Any]:
    return envelope("OrdenCancelada", {"order_id": str(uuid.uuid4()), "status": "CANCELADA_POR_USUARIO",
                                       "reason": "cancelada_por_usuario"},
                    saga_id=saga_id, source="pedidos")


def _addressed_to_pagos(value: dict[str, Any], topic: str, sign: Signer) -> dict[str, str]:
    """The headers of ``value`` on ``topic``, addressed to pagos, with what ``sign`` gives as
    its signature."""
    headers = {h.MESSAGE_ID: value["message_id"], h.SAGA_ID: value["saga_id"],
               h.EVENT_TYPE: value["event_type"], h.REPLAY_OF: str(uuid.uuid4()),
               h.REPLAY_FOR: "pagos"}
    signature = sign(Signed("pagos", topic, value["saga_id"].encode(),
                            json.dumps(value).encode(), value["message_id"], value["saga_id"]))
    if signature is not None:
        headers[h.REPLAY_SIGNATURE] = signature
    return headers


async def _forged_replays(saga: Saga, reason: str) -> float:
    """inventario's ``saga_forged_replays_total{reason}``, from its /metrics."""
    text = (await saga.http.get(f"{config.INVENTARIO}/metrics")).text
    for line in text.splitlines():
        if (line.startswith("saga_forged_replays_total{") and f'reason="{reason}"' in line
                and 'service="inventario"' in line):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"inventario exposes no saga_forged_replays_total{{reason={reason!r}}}")


@pytest.mark.parametrize(("sign", "reason"), [
    (_unsigned, "unsigned"),
    (_stranger, "unknown_key"),
    (_operator_for_another_record, "invalid_signature"),
], ids=["unsigned", "stranger's key", "operator's signature of another record"])
async def test_a_cancellation_addressed_to_pagos_unsigned_by_the_operator_still_reaches_inventario(
        saga: Saga, sign: Signer, reason: str) -> None:
    saga_id = str(uuid.uuid4())
    value = _cancelled(saga_id)
    before = await _forged_replays(saga, reason)
    await produce("order-events", value,
                  headers=_addressed_to_pagos(value, "order-events", sign))
    # inventario acted on it: the saga it never saw is blocked, the message in its inbox.
    await wait_for(lambda: db.fetchval("SELECT status FROM inventario.allocations "
                                       "WHERE saga_id = $1", saga_id),
                   lambda status: status == "BLOCKED", timeout=15,
                   what="inventario blocked the cancelled saga")
    assert await db.fetchval("SELECT status FROM inventario.processed_messages "
                             "WHERE message_id = $1", value["message_id"]) == "processed"
    # At least once: a record fetched again (a retry, a rebalance) is counted again.
    assert await _forged_replays(saga, reason) >= before + 1


async def test_a_forgery_addressed_to_pagos_is_still_dead_lettered_by_the_others(
        saga: Saga) -> None:
    # A PagoExitoso that pagos did not write: before the signature, X-Replay-For: pagos made
    # inventario and pedidos skip it, unseen; now each dead-letters it as any forgery.
    saga_id = str(uuid.uuid4())
    forged = envelope("PagoExitoso", {"order_id": str(uuid.uuid4()),
                                      "payment_id": str(uuid.uuid4()), "charge_id": "ch_forged",
                                      "amount": "10.00", "currency": "USD"},
                      saga_id=saga_id, source="inventario")
    async with TopicReader("inventario-dlq") as inventario_dlq, \
            TopicReader("pedidos-dlq") as pedidos_dlq:
        await produce("payment-events", forged,
                      headers=_addressed_to_pagos(forged, "payment-events", _unsigned))
        for service, reader in (("inventario", inventario_dlq), ("pedidos", pedidos_dlq)):
            record = await reader.wait_for(
                lambda r: json.loads(r.value)["original"]["message_id"] == forged["message_id"])
            letter = json.loads(record.value)
            assert letter["consumer_service"] == service
            assert letter["reason"] == "contract_violation", letter
            assert headers_of(record)["X-DLQ-Error-Class"] == "contract_violation"
