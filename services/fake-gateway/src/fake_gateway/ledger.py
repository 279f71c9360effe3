"""The gateway's own storage: charges, refunds and idempotency keys in a SQLite file."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS charges (
    id TEXT PRIMARY KEY, amount INTEGER NOT NULL, currency TEXT NOT NULL, source TEXT NOT NULL,
    status TEXT NOT NULL, decline_code TEXT, idempotency_key TEXT UNIQUE,
    amount_refunded INTEGER NOT NULL DEFAULT 0, metadata TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS refunds (
    id TEXT PRIMARY KEY, charge TEXT NOT NULL REFERENCES charges(id), amount INTEGER NOT NULL,
    status TEXT NOT NULL, idempotency_key TEXT UNIQUE, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT NOT NULL, endpoint TEXT NOT NULL, fingerprint TEXT NOT NULL,
    status_code INTEGER, body TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (endpoint, key));
"""


class Ledger:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL syncs at checkpoints, not at every commit: a killed gateway (what
        # the tests do to it) loses nothing, since the WAL is in the OS's cache; only a crash of
        # the machine itself could lose its last answers. FULL cost three disk flushes per
        # charge: milliseconds that a stand-in for the bank added to every saga's critical path.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    # ---- idempotency

    def idempotency_attempt(self, endpoint: str, key: str, fingerprint: str) -> dict[str, Any]:
        """Counts an attempt for the key; returns the stored record (status/body if answered)."""
        with self._lock:
            row = self._db.execute("SELECT * FROM idempotency WHERE endpoint=? AND key=?",
                                   (endpoint, key)).fetchone()
            if row is None:
                self._db.execute("INSERT INTO idempotency(key, endpoint, fingerprint, attempts) "
                                 "VALUES (?,?,?,1)", (key, endpoint, fingerprint))
                return {"fingerprint": fingerprint, "status_code": None, "body": None,
                        "attempts": 1}
            if row["status_code"] is None:
                self._db.execute("UPDATE idempotency SET attempts = attempts + 1 "
                                 "WHERE endpoint=? AND key=?", (endpoint, key))
            return {"fingerprint": row["fingerprint"], "status_code": row["status_code"],
                    "body": json.loads(row["body"]) if row["body"] else None,
                    "attempts": row["attempts"] + (1 if row["status_code"] is None else 0)}

    def remember(self, endpoint: str, key: str, status_code: int, body: Any) -> None:
        with self._lock:
            self._db.execute("UPDATE idempotency SET status_code=?, body=? "
                             "WHERE endpoint=? AND key=?",
                             (status_code, json.dumps(body), endpoint, key))

    # ---- charges and refunds

    def create_charge(self, *, amount: int, currency: str, source: str, status: str,
                      decline_code: str | None, idempotency_key: str,
                      metadata: dict[str, Any]) -> dict[str, Any]:
        charge_id = "ch_" + uuid.uuid4().hex[:24]
        with self._lock:
            self._db.execute(
                "INSERT INTO charges(id, amount, currency, source, status, decline_code, "
                "idempotency_key, metadata, created) VALUES (?,?,?,?,?,?,?,?,julianday('now'))",
                (charge_id, amount, currency, source, status, decline_code, idempotency_key,
                 json.dumps(metadata)))
        return self.charge(charge_id)  # type: ignore[return-value]

    def charge(self, charge_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT * FROM charges WHERE id=?", (charge_id,)).fetchone()
        return _charge_dict(row) if row else None

    def source_of(self, charge_id: str) -> str:
        row = self._db.execute("SELECT source FROM charges WHERE id=?", (charge_id,)).fetchone()
        return str(row["source"])

    def create_refund(self, *, charge_id: str, amount: int, idempotency_key: str
                      ) -> dict[str, Any]:
        """Records a refund atomically; raises ValueError if it would exceed the charge."""
        refund_id = "re_" + uuid.uuid4().hex[:24]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT amount, amount_refunded FROM charges WHERE id=?",
                                       (charge_id,)).fetchone()
                if row["amount_refunded"] + amount > row["amount"]:
                    raise ValueError("refund exceeds the charge's remaining amount")
                self._db.execute("UPDATE charges SET amount_refunded = amount_refunded + ? "
                                 "WHERE id=?", (amount, charge_id))
                self._db.execute(
                    "INSERT INTO refunds(id, charge, amount, status, idempotency_key, created) "
                    "VALUES (?,?,?,?,?,julianday('now'))",
                    (refund_id, charge_id, amount, "succeeded", idempotency_key))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return {"id": refund_id, "object": "refund", "charge": charge_id, "amount": amount,
                "status": "succeeded", "idempotency_key": idempotency_key}

    def snapshot(self) -> dict[str, Any]:
        charges = [_charge_dict(r) for r in
                   self._db.execute("SELECT * FROM charges ORDER BY created, id")]
        refunds = [dict(r) for r in self._db.execute(
            "SELECT id, charge, amount, status, idempotency_key FROM refunds "
            "ORDER BY created, id")]
        return {"charges": charges, "refunds": refunds}


def _charge_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "object": "charge", "amount": row["amount"],
            "currency": row["currency"], "status": row["status"],
            "decline_code": row["decline_code"], "idempotency_key": row["idempotency_key"],
            "amount_refunded": row["amount_refunded"],
            "metadata": json.loads(row["metadata"] or "{}")}
