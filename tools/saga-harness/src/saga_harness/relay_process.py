"""An outbox relay in a process of its own, for the tests that hang it (SIGSTOP) or cut it off
from PostgreSQL or Kafka while another instance stands by.

    python -m saga_harness.relay_process SCHEMA INSTANCE DATABASE_URL KAFKA_BOOTSTRAP

It publishes the outbox of SCHEMA (a scratch schema: ``saga_harness.scratch``) as a service's
relay does, with the default relay settings, and prints a JSON line whenever what it says of
itself changes: whether it leads (``OutboxRelay.is_leader``) and how many rows Kafka
acknowledged to it, with the time on the machine's monotonic clock (which the test's process
reads too). SIGTERM stops it. ``RelayProcess`` runs one from a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from saga_harness import config
from saga_harness.waiting import wait_for


@dataclass(frozen=True)
class Report:
    at: float
    """``time.monotonic()`` in the relay's process when it said so."""
    leader: bool
    published: int


@dataclass
class RelayProcess:
    """One relay process and what it has said so far."""

    schema: str
    instance: str
    database_url: str
    kafka_bootstrap: str
    log: Path
    reports: list[Report] = field(default_factory=list)
    _process: asyncio.subprocess.Process | None = None
    _reader: asyncio.Task[None] | None = None

    async def start(self) -> RelayProcess:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "saga_harness.relay_process", self.schema, self.instance,
            self.database_url, self.kafka_bootstrap, stdout=asyncio.subprocess.PIPE,
            stderr=self.log.open("ab"), env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        async for line in self._process.stdout:
            said = json.loads(line)
            self.reports.append(Report(said["at"], said["leader"], said["published"]))

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def last(self) -> Report | None:
        return self.reports[-1] if self.reports else None

    @property
    def leads(self) -> bool:
        return bool(self.reports) and self.reports[-1].leader

    @property
    def published(self) -> int:
        return self.reports[-1].published if self.reports else 0

    async def wait(self, accept: Callable[[RelayProcess], bool], *, timeout: float,
                   what: str) -> Report:
        async def probe() -> RelayProcess:
            return self

        await wait_for(probe, accept, timeout=timeout, what=f"relay {self.instance}: {what}")
        last = self.last
        assert last is not None
        return last

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    async def stop(self) -> None:
        if self._process is None or self._process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)
            self._process.terminate()
        try:
            await asyncio.wait_for(self._process.wait(), 20)
        except TimeoutError:
            self._process.kill()
            await self._process.wait()
        if self._reader is not None:
            await self._reader


async def _run(schema: str, instance: str, database_url: str, kafka_bootstrap: str) -> None:
    from sagakit.outbox.relay import OutboxRelay
    from sagakit.settings import MessagingSettings
    from sagakit.store.database import build_engine
    from sagakit.store.tables import messaging_tables, service_metadata

    engine = build_engine(database_url, f"{schema}-{instance}", 2)
    settings = MessagingSettings(**{**config.kafka_fields(),
                                    "kafka_bootstrap_servers": kafka_bootstrap})
    relay = OutboxRelay(engine, messaging_tables(service_metadata(schema)), schema, settings,
                        instance=instance)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    running = asyncio.create_task(relay.run(stop))
    said: tuple[bool, int] | None = None
    while not running.done():
        now = (relay.is_leader, relay.published_total)
        if now != said:
            said = now
            print(json.dumps({"at": time.monotonic(), "leader": now[0], "published": now[1]}),
                  flush=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(running), 0.02)
    await running
    await engine.dispose()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    schema, instance, database_url, kafka_bootstrap = sys.argv[1:5]
    asyncio.run(_run(schema, instance, database_url, kafka_bootstrap))


if __name__ == "__main__":
    main()
