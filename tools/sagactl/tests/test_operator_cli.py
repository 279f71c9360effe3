"""sagactl: a stuck saga shows up, a dead letter is listed with its errors, fixed by its cause
going away, replayed under a new message id for its one consumer (signed with the operator's
key, which the stack made and sagactl finds in the checkout), and the saga completes."""

from __future__ import annotations

import json
import subprocess
import sys

from saga_harness import db
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import reconfigured, row_locked
from saga_harness.waiting import wait_for


def sagactl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sagactl.cli", *args], capture_output=True,
                          text=True, timeout=60)


async def _dead_letter_of(saga_id: str) -> str | None:
    return await db.fetchval("SELECT message_id::text FROM inventario.outbox "
                             "WHERE topic = 'inventario-dlq' AND saga_id = $1", saga_id)


async def test_replay_a_dead_letter_and_the_saga_completes(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    quick_give_up = {"INVENTARIO_LOCK_TIMEOUT_S": "0.3", "SAGA_RETRY_INITIAL_BACKOFF_S": "0.1"}
    # The operator's key, the one the stack gave the services the public half of.
    key = sagactl("signing-key")
    assert key.returncode == 0, key.stderr
    key_id = key.stdout.strip().partition(":")[0]
    # Each sagactl below is a process of its own (seconds on a busy machine): the allocation's
    # deadline is made long enough for all of them.
    with reconfigured("pedidos", {"PEDIDOS_ALLOCATION_TIMEOUT_S": "90"}), \
            reconfigured("inventario", quick_give_up):
        # Someone holds the product's row lock for too long: the allocation cannot get it,
        # retries with backoff, and gives up into the dead-letter topic.
        async with row_locked("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE",
                              sku):
            placed = await saga.place(order_body([(sku, 2)]))
            dead_id = await wait_for(lambda: _dead_letter_of(placed["saga_id"]),
                                     lambda x: x is not None, timeout=30,
                                     what="PagoExitoso dead-lettered")
        assert (await saga.order(placed["order_id"]))["status"] == "PENDIENTE_ASIGNACION"

        listing = sagactl("dlq", "--service", "inventario", "--errors")
        assert listing.returncode == 0, listing.stderr
        assert dead_id in listing.stdout and "retries_exhausted" in listing.stdout
        assert "lock timeout" in listing.stdout or "LockNotAvailable" in listing.stdout

        stuck = sagactl("sagas", "--status", "PENDIENTE_ASIGNACION")
        assert placed["saga_id"] in stuck.stdout

        dry = sagactl("replay", dead_id, "--service", "inventario", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        plan = json.loads(dry.stdout[:dry.stdout.rindex("}") + 1])
        assert plan["headers"]["X-Replay-For"] == "inventario"
        # Signed with the operator's key.
        assert plan["headers"]["X-Replay-Signature"].startswith(f"{key_id}:")
        original_id = plan["headers"]["X-Replay-Of"]
        assert plan["value"]["message_id"] != original_id
        assert plan["value"]["metadata"]["replay_of"] == original_id
        assert (await saga.order(placed["order_id"]))["status"] == "PENDIENTE_ASIGNACION"

        done = sagactl("replay", dead_id, "--service", "inventario")
        assert done.returncode == 0, done.stderr
        order = await saga.wait_terminal(placed["order_id"], timeout=15)

    assert order["status"] == "COMPLETADA"
    assert await saga.stock(sku) == 3
    new_id = await db.fetchval(
        "SELECT message_id FROM inventario.processed_messages WHERE saga_id = $1 AND "
        "event_type = 'PagoExitoso' AND status = 'processed'", placed["saga_id"])
    replayed_as = done.stdout.rsplit("replayed as ", 1)[1].split()[0]
    assert new_id == replayed_as != original_id
    assert await db.fetchval("SELECT status FROM inventario.processed_messages "
                             "WHERE message_id = $1", original_id) == "dead_lettered"
    # pedidos consumes payment-events too, but the replay was addressed, and signed, for
    # inventario.
    assert await db.fetchval("SELECT count(*) FROM pedidos.processed_messages "
                             "WHERE message_id = $1", new_id) == 0
    timeline = sagactl("timeline", placed["saga_id"])
    assert timeline.returncode == 0
    for expected in ("StockAsignado", "COMPLETADA", "dead_lettered", "gateway charge"):
        assert expected in timeline.stdout
