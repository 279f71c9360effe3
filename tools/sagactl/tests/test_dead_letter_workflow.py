"""The dead-letter workflow with sagactl against the running stack: two letters of one group
(inventario gave up on two PagoExitoso for a held lock), grouped by error class; a dry run of the
group shows what would be sent and sends nothing; one letter is archived with a reason (who,
when, why in the published view); the group replay sends only the open one, whose saga
completes; the archived one cannot be replayed. Every command with ``--output json``."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
from typing import Any

from saga_harness import db
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import reconfigured, row_locked
from saga_harness.waiting import wait_for


def sagactl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sagactl.cli", *args], capture_output=True,
                          text=True, timeout=90)


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def _letter_of(saga_id: str) -> str | None:
    return await db.fetchval("SELECT id::text FROM inventario_read.dead_letters_v1 "
                             "WHERE saga_id = $1", saga_id)


async def _state(letter_id: str) -> dict[str, Any]:
    [row] = await db.fetch("SELECT state, last_action, last_action_by, last_action_reason, "
                           "last_action_at FROM inventario_read.dead_letters_v1 "
                           "WHERE id::text = $1", letter_id)
    return dict(row)


async def test_group_dry_run_archive_and_group_replay(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 10)
    quick_give_up = {"INVENTARIO_LOCK_TIMEOUT_S": "0.3", "SAGA_RETRY_INITIAL_BACKOFF_S": "0.1"}
    with reconfigured("pedidos", {"PEDIDOS_ALLOCATION_TIMEOUT_S": "120"}), \
            reconfigured("inventario", quick_give_up):
        async with row_locked("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE",
                              sku):
            placed = [await saga.place(order_body([(sku, 1)])) for _ in range(2)]
            letters = [await wait_for(lambda p=p: _letter_of(p["saga_id"]),
                                      lambda x: x is not None, timeout=40,
                                      what="PagoExitoso dead-lettered") for p in placed]
        kept, archived = letters

        groups = as_json(sagactl("dlq", "--service", "inventario", "--state", "open",
                                 "--group-by", "error_class", "--output", "json"))
        [group] = [g for g in groups if set(letters) <= set(g["ids"])]
        assert group["event_type"] == "PagoExitoso" and group["count"] >= 2
        error_class = group["error_class"]
        assert error_class == "LockNotAvailableError", group

        selection = ("--service", "inventario", "--event-type", "PagoExitoso",
                     "--error-class", error_class)
        dry = as_json(sagactl("replay-group", *selection, "--dry-run", "--output", "json"))
        mine = {o["id"]: o for o in dry if o["id"] in letters}
        assert {o["outcome"] for o in mine.values()} == {"would_replay"}, dry
        assert mine[kept]["plan"]["headers"]["X-Replay-For"] == "inventario"
        for p in placed:  # nothing was sent
            assert (await saga.order(p["order_id"]))["status"] == "PENDIENTE_ASIGNACION"
        assert (await _state(kept))["state"] == "open"

        done = as_json(sagactl("archive", archived, "--service", "inventario", "--reason",
                               "customer asked to drop it", "--output", "json"))
        assert done["state"] == "archived" and done["operator"] == getpass.getuser()
        state = await _state(archived)
        assert state["state"] == "archived" and state["last_action_by"] == getpass.getuser()
        assert state["last_action_reason"] == "customer asked to drop it"

        replayed = as_json(sagactl("replay-group", *selection, "--output", "json"))
        outcomes = {o["id"]: o for o in replayed}
        assert outcomes[kept]["outcome"] == "replayed" and archived not in outcomes
        order = await saga.wait_status(placed[0]["order_id"], "COMPLETADA", timeout=30)
        assert order["status"] == "COMPLETADA"
        state = await _state(kept)
        assert state["state"] == "replayed" and state["last_action_by"] == getpass.getuser()
        detail = await db.fetchval(
            "SELECT detail->>'message_id' FROM inventario.dead_letter_actions "
            "WHERE dead_letter_id = $1::uuid AND action = 'replayed'", kept)
        assert detail == outcomes[kept]["message_id"]

        again = sagactl("replay", archived, "--service", "inventario", "--output", "json")
        assert again.returncode == 2 and json.loads(again.stdout)["outcome"] == "refused"
        assert (await saga.order(placed[1]["order_id"]))["status"] == "PENDIENTE_ASIGNACION"
