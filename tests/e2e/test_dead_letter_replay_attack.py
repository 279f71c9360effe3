"""A dead letter written by whoever can write a service's outbox replays nothing.

``<svc>_app``, the role of a service's internet-facing API, can write that service's outbox, and
so its dead letters. The attack: with pedidos_app's credentials, write into pedidos' dead
letters a ``PagoExitoso`` of pagos (and a ``StockAsignado`` of inventario) for a live saga,
with its total, as if pedidos had given up on them; the operator replays them with
``sagactl replay``. Were the letters believed, pedidos would complete an order that nobody
charged and whose stock nobody allocated.

A replay re-reads the original record from Kafka at the topic, partition and offset the letter
records and compares it byte for byte (``sagakit.operations.replay``): these originals are not
there, so the replay is refused, nothing is sent, the letter is marked forged through pedidos'
API and counted in ``saga_forged_replays_total``, which raises the ``ForgedReplay`` alert.
The saga is left as it was: pagos is paused, so it stays waiting for its payment.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

from saga_harness import db
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import paused
from saga_harness.forgeries import forged_count, forged_letter, write_as_pedidos_app
from saga_harness.kafka import envelope
from saga_harness.prometheus import running as prometheus
from saga_harness.waiting import wait_for


def sagactl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sagactl.cli", *args], capture_output=True,
                          text=True, timeout=60)


async def test_a_dead_letter_forged_in_the_outbox_is_refused_and_the_saga_untouched(
        saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    async with prometheus() as prom:
        with paused("pagos"):
            # A live saga waiting for its payment, which pagos (paused) never makes.
            placed = await saga.place(order_body([(sku, 2)]))
            saga_id, order_id = placed["saga_id"], placed["order_id"]
            await saga.wait_status(order_id, "PENDIENTE_PAGO", timeout=30)
            before = await forged_count()

            paid = envelope("PagoExitoso", {"order_id": order_id,
                                            "payment_id": str(uuid.uuid4()),
                                            "charge_id": "ch_forged", "amount": "10.00",
                                            "currency": "USD"},
                            saga_id=saga_id, source="pagos")
            allocated = envelope("StockAsignado", {"order_id": order_id,
                                                   "items": [{"sku": sku, "quantity": 2}]},
                                 saga_id=saga_id, source="inventario")
            forged = [
                await write_as_pedidos_app(forged_letter(paid, "payment-events", 0),
                                            saga_id, "PagoExitoso"),
                await write_as_pedidos_app(forged_letter(allocated, "inventory-events", 0),
                                            saga_id, "StockAsignado"),
            ]
            for letter_id in forged:
                done = sagactl("replay", letter_id, "--service", "pedidos")
                assert done.returncode != 0, done.stdout
                assert "does not match the broker" in done.stderr, done.stderr
                assert "replayed as" not in done.stdout

            # Nothing was sent: pedidos never saw either event, the saga waits for its
            # payment, inventario allocated nothing.
            assert (await saga.order(order_id))["status"] == "PENDIENTE_PAGO"
            assert await db.fetchval(
                "SELECT count(*) FROM pedidos.processed_messages WHERE saga_id = $1 "
                "AND event_type IN ('PagoExitoso', 'StockAsignado')", saga_id) == 0
            assert await db.fetchval(
                "SELECT count(*) FROM inventario.allocations WHERE saga_id = $1 "
                "AND status = 'ALLOCATED'", saga_id) == 0
            assert await saga.money_of(saga_id) == (0, 0, 0)

            # Each letter is marked forged (it can never be replayed), counted, alerted on.
            states = await db.fetch(
                "SELECT id::text, state FROM pedidos_read.dead_letters_v1 WHERE id = ANY($1)",
                forged)
            assert {r["id"]: r["state"] for r in states} == dict.fromkeys(forged, "forged")
            assert await forged_count() >= before + 2
            again = sagactl("replay", forged[0], "--service", "pedidos")
            assert again.returncode != 0 and "forged" in again.stderr, again.stderr

            async def forged_replay_alert() -> list[dict[str, Any]]:
                return [a for a in await prom.firing()
                        if a["labels"]["alertname"] == "ForgedReplay"
                        and a["labels"].get("service") == "pedidos"]
            await wait_for(forged_replay_alert, bool, timeout=30,
                           what="ForgedReplay firing for pedidos")
            # Whether the payment step's deadline passed while pagos was paused (a loaded
            # machine makes the steps above slow): then pedidos rightly cancels the order.
            past_deadline = await db.fetchval(
                "SELECT step_deadline_at <= now() FROM pedidos.sagas WHERE saga_id = $1::uuid",
                saga_id)
        # pagos back: the saga goes on as it would have, paid for real; past its payment
        # deadline it may instead be cancelled (whichever pedidos hears first), with nothing
        # charged for good.
        ended = (await saga.wait_terminal(order_id, timeout=30))["status"]
        if past_deadline and ended == "CANCELADA_TIMEOUT":
            await saga.wait_no_net_charge(saga_id, timeout=30)
        else:
            assert ended == "COMPLETADA", (ended, past_deadline)
