"""Dead letters forged as whoever can write a service's outbox could (its app role): the attack a
replay must refuse (``sagakit.operations.replay``), and the counter that says it did."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import httpx

from saga_harness import config
from saga_harness.identity import operator_headers


def forged_letter(event: dict[str, Any], topic: str, offset: int) -> dict[str, Any]:
    """A dead letter in the one format (``sagakit.dead_letters``) whose original is ``event``,
    claimed to sit at ``topic``[0]@``offset``."""
    headers = {"X-Message-ID": event["message_id"], "X-Saga-ID": event["saga_id"],
               "X-Event-Type": event["event_type"]}
    return {
        "dead_lettered_at": "2026-12-06T01:00:00.000000Z", "consumer_service": "pedidos",
        "reason": "retries_exhausted", "error_class": "OperationalError", "attempt_count": 1,
        "attempts": [{"attempt": 1, "at": "2026-12-06T01:00:00.000000Z",
                      "error": "OperationalError: connection reset"}],
        "last_traceback": "",
        "original": {"topic": topic, "partition": 0, "offset": offset, "timestamp": 0,
                     "key": event["saga_id"], "headers": headers,
                     "value": {"encoding": "utf-8", "data": json.dumps(event)},
                     "message_id": event["message_id"], "event_type": event["event_type"]},
    }


async def write_as_pedidos_app(letter: dict[str, Any], saga_id: str, event_type: str) -> str:
    """The letter inserted into pedidos' outbox with pedidos_app's credentials: its id."""
    letter_id = str(uuid.uuid4())
    conn = await asyncpg.connect(config.role_dsn("pedidos", "app"))
    try:
        await conn.execute(
            "INSERT INTO pedidos.outbox (message_id, saga_id, topic, event_type, "
            "schema_version, payload, headers) VALUES ($1::uuid, $2, 'pedidos-dlq', $3, "
            "'1.0.0', $4::jsonb, '{}'::jsonb)", letter_id, saga_id, event_type,
            json.dumps(letter))
    finally:
        await conn.close()
    return letter_id


async def forged_count() -> float:
    """pedidos' ``saga_forged_replays_total{reason="dead_letter_mismatch"}``."""
    async with httpx.AsyncClient(timeout=10, headers=operator_headers()) as http:
        text = (await http.get(f"{config.PEDIDOS}/metrics")).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("saga_forged_replays_total{") and 'service="pedidos"' in line \
                and 'reason="dead_letter_mismatch"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total
