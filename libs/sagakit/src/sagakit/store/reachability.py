"""Whether this instance can reach its database, seen from outside its own work.

A handler whose connection is cut off without a FIN or RST (a partition, a black hole) learns
nothing until its statement times out, tens of seconds later, and then retries for as long as
the database stays away (``sagakit.consumer.processing``). Meanwhile its consumer keeps its
partitions (its heartbeats still reach Kafka) and the sagas on them wait for the fault's end,
although another instance could handle them. ``Reachability`` asks the database a trivial
question on a connection of its own, every ``interval_s``: once no answer has come for
``lost_after_s``, the database counts as lost to this instance, and its consumer leaves the
group until an answer comes again (``sagakit.consumer.loop``), so the group gives its partitions
to an instance that can do the work.

A connection of its own, not one of the pool's: a pool busy with a burst would make the probe
wait its turn, and a slow burst is not a lost database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import asyncpg

from sagakit.errors import CONNECTION_LOST
from sagakit.observability import metrics
from sagakit.store.postgres_url import postgres_target

log = logging.getLogger("sagakit.store")


class Reachability:
    def __init__(self, url: Any, service: str, *, lost_after_s: float,
                 interval_s: float = 1.0) -> None:
        """``url``: the pool's (SQLAlchemy's URL or its text), TLS parameters included."""
        self._target = postgres_target(url)
        self.service = service
        self.lost_after_s = lost_after_s
        self.interval_s = interval_s
        # One probe may take this long: a few of them fit in ``lost_after_s``.
        self.probe_timeout_s = max(0.5, min(2.0, lost_after_s / 2.5))
        self._conn: asyncpg.Connection | None = None
        self._last_answer = time.monotonic()
        self.lost = asyncio.Event()
        """Set while no answer has come for ``lost_after_s``."""
        self.regained = asyncio.Event()
        """Set while the database answers (the opposite of ``lost``)."""
        self.regained.set()
        metrics.DATABASE_REACHABLE.labels(service).set(1)

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                answered = await self._probe()
                self._record(answered, time.monotonic())
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval_s)
        finally:
            await self._close()

    def _record(self, answered: bool, now: float) -> None:
        if answered:
            self._last_answer = now
            if self.lost.is_set():
                log.warning("database reachable again", extra={"service": self.service})
                self.lost.clear()
                self.regained.set()
                metrics.DATABASE_REACHABLE.labels(self.service).set(1)
            return
        silent_s = now - self._last_answer
        if silent_s >= self.lost_after_s and not self.lost.is_set():
            log.warning("database unreachable for %.1fs: this instance's consumer leaves its "
                        "group until it answers again", silent_s,
                        extra={"service": self.service})
            self.regained.clear()
            self.lost.set()
            metrics.DATABASE_REACHABLE.labels(self.service).set(0)

    async def _probe(self) -> bool:
        try:
            async with asyncio.timeout(self.probe_timeout_s):
                if self._conn is None or self._conn.is_closed():
                    self._conn = await asyncpg.connect(
                        self._target.dsn(), timeout=self.probe_timeout_s,
                        **self._target.connect_args({"application_name":
                                                     f"{self.service}-reachability"}))
                await self._conn.fetchval("SELECT 1")
            return True
        except asyncio.CancelledError:
            raise
        except (*CONNECTION_LOST, asyncpg.PostgresError) as exc:
            log.debug("database probe failed: %r", exc, extra={"service": self.service})
            await self._close()
            return False

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            # terminate(), not close(): close() waits for the server, which may be the one
            # not answering.
            conn.terminate()
