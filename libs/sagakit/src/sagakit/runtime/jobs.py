"""Periodic jobs run, each in a task of its own: the messaging's own (gauges, cleanup of the
outbox and the inbox) and a service's (a deadline scanner, a gateway worker's schedule), which
its ``ServiceDefinition`` declares as ``PeriodicJob``s (``sagakit.runtime.service``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sagakit.observability import metrics
from sagakit.operations.dead_letter_actions import count_open, delete_archived
from sagakit.outbox.housekeeping import cleanup_published, refresh_outbox_gauges
from sagakit.runtime.service import PeriodicJob, RunAgainIn, Runtime
from sagakit.settings import MessagingSettings
from sagakit.store import inbox

log = logging.getLogger("sagakit.runtime")


def messaging_jobs(settings: MessagingSettings) -> list[PeriodicJob]:
    async def gauges(rt: Runtime) -> None:
        await refresh_outbox_gauges(rt.engine, rt.tables, rt.name)
        await inbox.refresh_dead_letter_gauge(rt.engine, rt.tables, rt.name)
        metrics.DEAD_LETTERS_OPEN.labels(rt.name).set(
            await count_open(rt.engine, rt.tables.schema))
        if rt.consumer:
            # Asking Kafka can hang while it is down; the other gauges must go on meanwhile.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(rt.consumer.refresh_lag(), 1.5)

    async def cleanup(rt: Runtime) -> None:
        outbox_rows = await cleanup_published(rt.engine, rt.tables,
                                              settings.outbox_retention_days,
                                              settings.cleanup_batch_size)
        inbox_rows = await inbox.cleanup_processed(rt.engine, rt.tables,
                                                   settings.inbox_retention_days,
                                                   settings.cleanup_batch_size,
                                                   settings.inbox_dead_letter_retention_days)
        letters = await delete_archived(rt.engine, rt.tables.schema,
                                        settings.dead_letter_retention_days,
                                        settings.cleanup_batch_size)
        if outbox_rows or inbox_rows or letters:
            log.info("cleanup removed %s outbox and %s inbox rows, %s archived dead letters",
                     outbox_rows, inbox_rows, letters)

    return [PeriodicJob("messaging-gauges", 5.0, gauges),
            PeriodicJob("messaging-cleanup", settings.cleanup_interval_s, cleanup)]


async def run_periodic(job: PeriodicJob, rt: Runtime, stop: asyncio.Event) -> None:
    while not stop.is_set():
        wait_s = job.interval_s
        try:
            result = await job.run(rt)
            if isinstance(result, RunAgainIn):
                wait_s = min(wait_s, max(0.0, result.seconds))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("periodic job %s failed", job.name, exc_info=True)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), wait_s)
