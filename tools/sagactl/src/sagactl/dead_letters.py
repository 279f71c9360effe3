"""sagactl's dead-letter commands: list and group letters (through each service's published
view ``<svc>_read.dead_letters_v1``), replay one or a group, archive one (through the owning
service's API, as the operator: ``operator_access``).

A replay trusts only the broker (``sagakit.operations.replay``, run by the replayer sagactl
shares with the console, ``sagakit.operations.replayer``): the letter's original is
re-read from Kafka at its recorded address and must match it byte for byte, and must be an
event the service consumes; what is sent is the broker's record, under a new message id, signed
with the operator's key, as the ``operator`` principal. A letter that does not match is
reported to its service as forged (never replayed afterwards; the ForgedReplay alert fires) and
nothing is sent. ``--dry-run`` checks the same and sends nothing, reports nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saga_contracts import topology
from sagactl import operator_access
from sagactl.operator_access import ApiError
from sagakit.operations.replay import Outcome, ReplayRefused
from sagakit.operations.replayer import LetterUnavailable, Replayer
from sagakit.settings import KafkaClientSettings

SERVICES = topology.SERVICES
STATES = ("open", "replayed", "archived", "forged")
GROUP_KEYS = ("reason", "error_class")

_COLUMNS = ("id::text AS id, service, at, saga_id, event_type, reason, error_class, attempts, "
            "original_topic, original_partition, original_offset, state, last_action, "
            "last_action_by, last_action_at, last_action_reason")


# ------------------------------------------------------------------ reading (the views)


async def letters(conn: asyncpg.Connection, *, service: str | None = None,
                  state: str | None = None, event_type: str | None = None,
                  error_class: str | None = None, letter_id: str | None = None,
                  limit: int = 1000) -> list[dict[str, Any]]:
    """Dead letters as the services publish them, newest first."""
    out: list[dict[str, Any]] = []
    for svc in ([service] if service else SERVICES):
        rows = await conn.fetch(
            f"SELECT {_COLUMNS} FROM {svc}_read.dead_letters_v1 "
            "WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR event_type = $2) "
            "AND ($3::text IS NULL OR error_class = $3) AND ($4::text IS NULL OR id::text = $4) "
            "ORDER BY at DESC LIMIT $5", state, event_type, error_class, letter_id, limit)
        for r in rows:
            row = dict(r)
            if isinstance(row["attempts"], str):
                row["attempts"] = json.loads(row["attempts"])
            out.append(row)
    return sorted(out, key=lambda d: d["at"], reverse=True)[:limit]


def grouped(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Letters counted per service, event type and ``key`` (reason or error class)."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        k = (r["service"], r["event_type"], str(r.get(key)))
        g = groups.setdefault(k, {"service": k[0], "event_type": k[1], key: k[2], "count": 0,
                                  "oldest": r["at"], "newest": r["at"], "ids": []})
        g["count"] += 1
        g["oldest"], g["newest"] = min(g["oldest"], r["at"]), max(g["newest"], r["at"])
        g["ids"].append(r["id"])
    return sorted(groups.values(), key=lambda g: (-g["count"], g["service"], g[key]))


# ------------------------------------------------------------------ replaying


class ThroughTheApi:
    """``sagakit.operations.replayer.DeadLetterApi`` over sagactl's calls as the operator."""

    async def letter(self, service: str, letter_id: str) -> dict[str, Any]:
        try:
            return operator_access.call(service, "GET", f"/operator/dead-letters/{letter_id}")
        except ApiError as exc:
            raise LetterUnavailable(exc.detail) from None

    async def forged(self, service: str, letter_id: str, reason: str) -> None:
        operator_access.call(service, "POST", f"/operator/dead-letters/{letter_id}/forgeries",
                             {"reason": reason})

    async def replayed(self, service: str, letter_id: str, message_id: str, topic: str) -> str:
        try:
            claimed = operator_access.call(
                service, "POST", f"/operator/dead-letters/{letter_id}/replays",
                {"message_id": message_id, "topic": topic})
        except ApiError as exc:
            if exc.status in (404, 409):
                raise ReplayRefused(exc.detail) from None
            raise
        return str(claimed["message_id"])


def replayer(service: str, signing_key: Callable[[], Ed25519PrivateKey],
             kafka: KafkaClientSettings, dry_run: bool = False) -> Replayer:
    """The shared replayer (``sagakit.operations.replayer``), through sagactl's API calls."""
    return Replayer(service, ThroughTheApi(), signing_key, kafka, dry_run)


async def replay_group(conn: asyncpg.Connection, replayer: Replayer, event_type: str,
                       error_class: str, limit: int) -> list[Outcome]:
    """The open letters of ``replayer.service`` of ``event_type`` and ``error_class``, each
    replayed (or refused) on its own, oldest first."""
    rows = await letters(conn, service=replayer.service, state="open", event_type=event_type,
                         error_class=error_class, limit=limit)
    return await replayer.group(r["id"] for r in sorted(rows, key=lambda r: r["at"]))


def archive(service: str, letter_id: str, reason: str) -> dict[str, Any]:
    return operator_access.call(service, "POST", f"/operator/dead-letters/{letter_id}/archive",
                                {"reason": reason})
