"""pagos' dead letter of a charge the gateway never made keeps the StockVerificado it rebuilt
from the payment, and where the original record sits: ``sagactl replay`` re-reads that record
from Kafka, finds it is the same message, and sends the broker's record (not the rebuilt copy)
to pagos, which makes the charge due again (the gateway then tries it anew)."""

from __future__ import annotations

import subprocess
import sys

from saga_harness import db
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.waiting import wait_for


def sagactl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sagactl.cli", *args], capture_output=True,
                          text=True, timeout=90)


async def _letter(saga_id: str) -> str | None:
    return await db.fetchval("SELECT id::text FROM pagos_read.dead_letters_v1 "
                             "WHERE saga_id = $1", saga_id)


async def _charge_calls(saga_id: str) -> int:
    return int(await db.fetchval(
        "SELECT count(*) FROM pagos.payments, jsonb_array_elements(attempt_log) a "
        "WHERE saga_id = $1 AND a->>'kind' = 'charge'", saga_id))


async def test_a_charge_given_up_on_is_replayed_from_the_broker(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    # The gateway answers nine times with a transient error: pagos gives up after four calls.
    placed = await saga.place(order_body([(sku, 1)], token="tok_transient9"))
    letter_id = await wait_for(lambda: _letter(placed["saga_id"]), lambda x: x is not None,
                               timeout=30, what="the charge dead-lettered")
    [row] = await db.fetch("SELECT original_topic, original_partition, original_offset "
                           "FROM pagos_read.dead_letters_v1 WHERE id::text = $1", letter_id)
    assert row["original_topic"] == "inventory-events"
    assert row["original_partition"] is not None and row["original_offset"] is not None
    calls = await _charge_calls(placed["saga_id"])

    done = sagactl("replay", letter_id, "--service", "pagos")
    assert done.returncode == 0, done.stderr
    assert "replayed as" in done.stdout
    assert await db.fetchval("SELECT state FROM pagos_read.dead_letters_v1 WHERE id::text = $1",
                             letter_id) == "replayed"
    # pagos took it for the operator's replay: the charge is tried again.
    await wait_for(lambda: _charge_calls(placed["saga_id"]), lambda n: n > calls, timeout=30,
                   what="the charge called again")
