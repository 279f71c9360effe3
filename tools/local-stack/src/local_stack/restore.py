"""``python -m local_stack restore``: the stack's PostgreSQL recovered to a point in time, and
the saga made consistent again around it (docs/operations.md, "Backups and point-in-time
recovery").

After a restore to T the database is the one of T (every service's schema: one database), but
Kafka is not: its topics hold records written after T, and each consumer group's offsets are
past records whose handling the restore undid. So, with the services stopped:

1. Each service's outbox rows published in the ``REPUBLISH_WINDOW_S`` before T become pending
   again: the relays publish them again under their message ids. A consumer whose handling of
   one was kept drops the copy at its inbox; one whose handling was lost with the restore
   (the record was read after T) handles it now.
2. Every service's consumer group moves to the end of the topics it reads: the records on Kafka
   that the restored database does not know of (written after T, about orders, payments or
   allocations that no longer exist) are never handled; everything the database knows of and
   had not published before T is pending in its outbox and comes after that end.

3. pagos' payments not yet sent to the gateway at T are marked as maybe charged: the gateway
   is not restored, and may have charged them since.
4. The participants start first; just before pedidos starts, the deadlines of the sagas in
   flight move on by the time since T (plus ``RESTART_GRACE_S``): the outage does not count
   against them.

The window has to be longer than the consumers' lag at T (seconds, when the stack is healthy).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from aiokafka import AIOKafkaConsumer, TopicPartition

from local_stack import kafka_auth
from local_stack.console import log
from local_stack.kafka import until_kafka_answers
from local_stack.parts import service_parts, start_py
from local_stack.postgres import backup
from local_stack.postgres.cluster import start_postgres
from local_stack.probes import port_open
from local_stack.processes import alive, read_pid, stop_group
from local_stack.settings import KAFKA_PORT, PG_DB, SERVICE_PORTS
from saga_contracts.topics import DOMAIN_TOPICS, INVENTORY_EVENTS, ORDER_EVENTS, PAYMENT_EVENTS
from sagakit.kafka import client_security
from sagakit.kafka_topics import admin_client
from sagakit.store.tables import OUTBOX_PENDING, OUTBOX_PUBLISHED

REPUBLISH_WINDOW_S = 600.0
# Added to the outage when the sagas' deadlines move on: pedidos' own start, and the first
# steps of the participants' catch-up.
RESTART_GRACE_S = 60.0
# The topic each service publishes; its consumer group reads the other domain topics.
OWN_TOPIC = {"pedidos": ORDER_EVENTS, "inventario": INVENTORY_EVENTS, "pagos": PAYMENT_EVENTS}


def restore(target: datetime | None, window_s: float = REPUBLISH_WINDOW_S) -> None:
    started = time.monotonic()
    if not port_open(KAFKA_PORT):
        # Checked before anything is touched: the consumer groups are moved after the recovery.
        raise SystemExit("[stack] Kafka is not running, and the restore moves the services' "
                         "consumer groups: `make up` first (it restarts a crashed PostgreSQL "
                         "too, which the restore then stops)")
    running = [p for p in service_parts() if alive(read_pid(p.name))]
    # All at once: an instance whose database is gone can take its whole grace to stop.
    log(f"stopping {', '.join(p.name for p in running) or 'no service'} for the restore")
    with ThreadPoolExecutor(max(len(running), 1)) as pool:
        list(pool.map(lambda part: stop_group(part.name, grace_s=30), running))
    log(f"services stopped in {time.monotonic() - started:.1f}s")
    _, aside = backup.restore_cluster(target)
    start_postgres()
    until = asyncio.run(_make_saga_consistent(target, window_s))
    # The participants first, and the deadlines moved on just before pedidos starts: its
    # deadline scan starts with it.
    restarting = time.monotonic()
    moved = until is None
    for part in reversed(running):
        if part.service == "pedidos" and not moved:
            asyncio.run(_move_deadlines(until))
            moved = True
        log(f"starting {part.name} again")
        start_py(part)
    if not moved:
        asyncio.run(_move_deadlines(until))
    log(f"services started in {time.monotonic() - restarting:.1f}s; restore done in "
        f"{time.monotonic() - started:.1f}s; the replaced data directory is "
        f"{aside}")


async def _make_saga_consistent(target: datetime | None, window_s: float) -> datetime | None:
    """The outboxes, the payments and the consumer groups (module docstring); answers the time
    the restored database ends at (None: it never published anything)."""
    conn = await backup.connect_admin(PG_DB)
    try:
        if target is None:
            # The latest the restored database published is where its history ends.
            target = await conn.fetchval("SELECT max(t) FROM (" + " UNION ALL ".join(
                f"SELECT max(published_at) FROM {svc}.outbox" for svc in SERVICE_PORTS)
                + ") AS o(t)")
        if target is None:
            return None
        since = target - timedelta(seconds=window_s)
        for svc in SERVICE_PORTS:
            n = await conn.fetchval(
                f"WITH again AS (UPDATE {svc}.outbox SET status = '{OUTBOX_PENDING}' "
                f"WHERE status = '{OUTBOX_PUBLISHED}' AND published_at > $1 "
                "AND topic = ANY($2::text[]) RETURNING 1) SELECT count(*) FROM again",
                since, list(DOMAIN_TOPICS))
            log(f"{svc}: {n} event(s) published since {since.isoformat()} will be published "
                "again")
        # The gateway is not restored: a payment pagos had not sent when T was may have been
        # charged since. Marked as maybe charged, a cancellation resolves it by replaying the
        # charge under its idempotency key (which answers the charge the gateway made) instead
        # of dropping it.
        n = await conn.fetchval(
            "WITH marked AS (UPDATE pagos.payments SET charge_sent_at = now() WHERE status IN "
            "('CHARGING', 'CHARGE_FAILED') AND charge_sent_at IS NULL RETURNING 1) "
            "SELECT count(*) FROM marked")
        log(f"pagos: {n} payment(s) not yet sent at T are treated as maybe charged")
    finally:
        await conn.close()
    for svc in SERVICE_PORTS:
        await skip_to_end(svc, [t for t in DOMAIN_TOPICS if t != OWN_TOPIC[svc]])
    return target


async def _move_deadlines(target: datetime | None) -> None:
    """The outage does not count against the sagas in flight: their deadlines move on by the
    time since T (and pedidos' own start), so that they resume where they were rather than
    time out at once."""
    if target is None:
        return
    conn = await backup.connect_admin(PG_DB)
    try:
        n = await conn.fetchval(
            "WITH moved AS (UPDATE pedidos.sagas SET step_deadline_at = step_deadline_at + "
            "(now() - $1) + make_interval(secs => $2), expires_at = expires_at + (now() - $1) "
            "+ make_interval(secs => $2) WHERE finished_at IS NULL RETURNING 1) "
            "SELECT count(*) FROM moved", target, RESTART_GRACE_S)
    finally:
        await conn.close()
    log(f"pedidos: the deadlines of {n} saga(s) in flight moved on by the time since "
        f"{target.isoformat()} and {RESTART_GRACE_S:.0f} s")


async def skip_to_end(group: str, topics: list[str], deadline_s: float = 60) -> None:
    """Commits the end of every partition of ``topics`` as ``group``'s offsets (the group has
    no member: its service is stopped; a member leaving may still hold it for a moment)."""
    settings = kafka_auth.admin_client_settings()
    admin = admin_client(settings)
    await admin.start()
    try:
        described = await admin.describe_topics(topics)
    finally:
        await admin.close()
    partitions = [TopicPartition(t["topic"], p["partition"]) for t in described
                  for p in t["partitions"]]
    consumer = AIOKafkaConsumer(**client_security(settings), group_id=group,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        await until_kafka_answers(lambda: consumer.commit(dict(ends)),
                                  f"could not move {group}'s offsets", deadline_s)
    finally:
        await consumer.stop()
    log(f"{group}: consumer group moved to the end of {', '.join(topics)}: Kafka's records "
        "up to now are not handled again")
