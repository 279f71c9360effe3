"""The recovery drill of docs/operations.md ("Backups and point-in-time recovery"), on the local
stack: orders completed; ``python -m local_stack backup``; more orders, some still in flight when a target
time T is noted; more orders after T, some completed and some in flight; PostgreSQL's
postmaster SIGKILLed; ``python -m local_stack restore --target-time T``.

Then, on what was restored: the chaos suite's invariant checker passes (stock, money, payments
against the gateway's ledger, outboxes drained, inboxes with their effects), every saga that
was in flight at T reaches a terminal state, and the orders placed after T are gone: their
customer got a 202 and now gets 404 for the order, while the gateway may have charged them (the
charges the operator refunds, found by their idempotency key, ``charge-<saga id>``). Kafka's
records about those orders are never handled again (the consumer groups skip Kafka's history;
the outboxes publish again what the database knows of), which the checker and the stock
prove: nothing is allocated or charged twice for them after the restore.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chaos import checker, snapshot
from saga_harness import config, db, stack
from saga_harness.clients import TERMINAL, Saga, new_sku, order_body
from saga_harness.waiting import current, wait_for

STOCK = 1_000


async def _place(saga: Saga, sku: str, n: int, prefix: str) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(
        saga.place(order_body([(sku, 1)], customer=f"{prefix}-{uuid.uuid4().hex[:8]}"))
        for _ in range(n))))


def _data_dir() -> Path:
    return Path(stack.stack("pg-data-dir").stdout.strip())


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.timeout(240)
async def test_restore_to_a_point_in_time_after_a_crash(saga: Saga) -> None:
    data = _data_dir()
    backups = data.parent / "backup"
    had_backups = backups.exists()
    started_at = time.time()
    try:
        await _drill(saga, data)
    finally:
        # What the drill left: the data directory it replaced, the backups if it made the first.
        for folder in data.parent.glob("pg.replaced-*"):
            if folder.stat().st_mtime >= started_at:
                shutil.rmtree(folder, ignore_errors=True)
        if not had_backups:
            shutil.rmtree(backups, ignore_errors=True)


async def _drill(saga: Saga, data: Path) -> None:
    started = time.monotonic()
    sku = new_sku()
    await saga.set_stock(sku, STOCK)
    prefix = f"pitr-{uuid.uuid4().hex[:8]}"

    before_backup = await _place(saga, sku, 10, prefix)
    for placed in before_backup:
        await saga.wait_status(placed["order_id"], "COMPLETADA", timeout=30)

    t0 = time.monotonic()
    made = stack.stack("backup", check=False)
    backup_s = time.monotonic() - t0
    assert made.returncode == 0, made.stdout + made.stderr

    # Orders in flight at T: placed together, T noted as soon as the last one is accepted.
    before_t = await _place(saga, sku, 20, prefix)
    target = await db.fetchval("SELECT clock_timestamp()")
    # Read after T: an order still active then was active at T (statuses only move on).
    in_flight_at_t = [oid for oid, status in await _statuses(prefix) if status not in TERMINAL]
    assert in_flight_at_t, "no saga in flight at T"

    # After T: some complete (the gateway charges them, inventario allocates), some are still
    # in flight when the database dies.
    after_t = await _place(saga, sku, 10, prefix)
    for placed in after_t:
        await saga.wait_status(placed["order_id"], "COMPLETADA", timeout=30)
    after_t += await _place(saga, sku, 5, prefix)

    postmaster = int((data / "postmaster.pid").read_text().splitlines()[0])
    os.kill(postmaster, signal.SIGKILL)
    await wait_for(lambda: current(_running(postmaster)), lambda up: not up, timeout=10,
                   what=f"postmaster {postmaster} dead")

    t0 = time.monotonic()
    restored = stack.stack("restore", "--target-time", target.isoformat(), check=False)
    restore_s = time.monotonic() - t0
    said = restored.stdout + restored.stderr
    assert restored.returncode == 0, said

    # The services came back with the database (restore restarts them).
    for base in (config.PEDIDOS, config.INVENTARIO, config.PAGOS):
        r = await saga.http.get(f"{base}/ready")
        assert r.status_code == 200, (base, r.text)

    statuses = dict(await _statuses(prefix))
    assert all(p["order_id"] in statuses for p in before_backup + before_t), \
        "an order accepted before T is missing after the restore"

    # Every saga in flight at T finishes: the restore moved their deadlines on by the outage,
    # so they resume (a charge the gateway made after T is found again by its idempotency
    # key); the invariant checker below proves the money and the stock of each, whatever the
    # outcome.
    outcomes: Counter[str] = Counter()
    for placed in before_backup + before_t:
        order = await saga.wait_status(placed["order_id"], TERMINAL, timeout=60)
        outcomes[order["status"]] += 1
    for placed in before_backup:
        assert statuses[placed["order_id"]] == "COMPLETADA"

    # The orders accepted after T are gone: their customers get 404 for them...
    for placed in after_t:
        r = await saga.http.get(f"{config.PEDIDOS}/orders/{placed['order_id']}")
        assert r.status_code == 404, (placed, r.status_code, r.text)
    # ... while the gateway charged those that went that far: the customers the operator
    # refunds (docs/operations.md), found by the charge's idempotency key.
    ledger = await saga.ledger()
    charged_lost = {c["idempotency_key"] for c in ledger["charges"]
                    if c["status"] == "succeeded"} & {f"charge-{p['saga_id']}" for p in after_t}
    assert len(charged_lost) >= 10, charged_lost

    # The invariants hold on what was restored, and still once every consumer caught up.
    kept = [p["order_id"] for p in before_backup + before_t]
    await wait_for(lambda: _violations(kept, sku), lambda v: not v, timeout=30,
                   what="the invariant checker passing", interval=1)
    for svc in ("pedidos", "inventario", "pagos"):
        await saga.wait_caught_up(svc)
    assert await _violations(kept, sku) == []
    assert await saga.stock(sku) == STOCK - len(kept)
    print(f"\ndrill: {time.monotonic() - started:.1f}s in all; backup {backup_s:.1f}s, "
          f"restore {restore_s:.1f}s; {len(in_flight_at_t)} of {len(before_t)} sagas in flight "
          f"at T finished; outcomes {dict(outcomes)}; {len(after_t)} orders after T lost, "
          f"{len(charged_lost)} of them charged at the gateway\n"
          + "".join(f"  {line}\n" for line in said.splitlines() if line.startswith("[stack]")))


async def _statuses(prefix: str) -> list[tuple[str, str]]:
    rows = await db.fetch("SELECT order_id::text, status FROM pedidos.orders "
                          "WHERE customer_id LIKE $1", f"{prefix}-%")
    return [(r["order_id"], r["status"]) for r in rows]


async def _violations(acknowledged: list[str], sku: str) -> list[str]:
    taken = await snapshot.take(acknowledged, {sku: STOCK})
    return [str(v) for v in checker.check(taken)]
