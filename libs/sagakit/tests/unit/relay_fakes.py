"""Stand-ins for the relay's PostgreSQL connection and Kafka producer in unit tests."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from typing import Any

from sagakit.outbox.relay import OutboxRelay

ROWS = 200


def lead(relay: OutboxRelay) -> None:
    """Makes ``relay`` lead on its fake connection: the lease taken now, as epoch 1."""
    relay.lease._held(1, time.monotonic())
    relay._lead(True)


def outbox_row(i: int, saga: str | None = None) -> dict[str, Any]:
    """An outbox row as the unit of work writes it."""
    return {"message_id": f"m{i}", "saga_id": saga or f"s{i}", "topic": "t", "event_type": "E",
            "schema_version": "1.0.0", "payload": {"n": i}, "headers": {},
            "traceparent": None}


class FakeConnection:
    """An outbox table: ``rows`` pending at first, more as ``commit`` adds them (signalling the
    relay, as a unit of work's commit does); a select marks the rows it is given and returns the
    pending ones in id order; records what each statement marked."""

    def __init__(self, rows: int = ROWS) -> None:
        self.pending: dict[str, dict[str, Any]] = {f"m{i}": outbox_row(i) for i in range(rows)}
        self.selects = 0
        self.selected: list[str] = []
        self.marked_by_select: list[str] = []
        self.marked_alone: list[str] = []

    def is_closed(self) -> bool:
        return False

    def terminate(self) -> None:
        return None

    async def fetchval(self, query: str, *args: Any) -> int:
        """The lead's lease: taken and renewed at once, as epoch 1."""
        return 1

    def commit(self, relay: OutboxRelay, *rows: dict[str, Any]) -> None:
        for r in rows:
            self.pending[r["message_id"]] = r
        relay.signal.committed()

    async def fetch(self, query: str, ids: list[str], acked_at: list[dt.datetime], limit: int,
                    epoch: int) -> list[dict[str, Any]]:
        self.selects += 1
        self.marked_by_select += ids
        seen = [r for mid, r in self.pending.items() if mid not in ids][:limit]
        self.selected += [r["message_id"] for r in seen]
        for mid in ids:
            self.pending.pop(mid, None)
        now = dt.datetime.now(dt.UTC)
        return [{**r, "payload": json.dumps(r["payload"]), "headers": "{}", "created_at": now,
                 "attempts": 0} for r in seen]

    async def execute(self, query: str, *args: Any) -> None:
        if "unnest" not in query:
            return  # the lease given back
        ids: list[str] = args[0]
        self.marked_alone += ids
        for mid in ids:
            self.pending.pop(mid, None)


class FakeProducer:
    """Acknowledges every record at once, as a broker answering one request would; keeps
    what it was sent, as (saga id, payload's n)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    async def send(self, topic: str, **kwargs: Any) -> asyncio.Future[None]:
        self.sent.append((kwargs["key"].decode(), json.loads(kwargs["value"])["n"]))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut
