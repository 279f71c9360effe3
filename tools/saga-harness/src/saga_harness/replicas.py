"""The instances of a stack started with SAGA_REPLICAS=N, and a watch on who leads each
service's outbox relay.

The number of instances is read from the environment when asked, not at import: the chaos
suite restarts the stack with another SAGA_REPLICAS within one process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx

from local_stack.parts import instance_part_name
from local_stack.settings import SERVICE_PORTS, instance_port

SERVICES = ("pedidos", "inventario", "pagos")


def replicas() -> int:
    return int(os.environ.get("SAGA_REPLICAS", "1"))


def kafka_brokers() -> int:
    return int(os.environ.get("SAGA_KAFKA_BROKERS", "1"))


@dataclass(frozen=True)
class Instance:
    service: str
    k: int
    """1-based, as the stack numbers them."""

    @property
    def part(self) -> str:
        """Its name for ``python -m local_stack`` and ``saga_harness.stack``."""
        return instance_part_name(self.service, self.k)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{instance_port(SERVICE_PORTS[self.service], self.k)}"


def instances(service: str) -> list[Instance]:
    return [Instance(service, k) for k in range(1, replicas() + 1)]


def instance_urls(service: str) -> list[str]:
    return [i.url for i in instances(service)]


async def relay_role(http: httpx.AsyncClient, instance: Instance, timeout: float = 3.0
                     ) -> str | None:
    """What the instance's /ready says of its relay (``leader``, ``standby``, ``off``); None
    when it does not answer (killed, restarting, or too slow)."""
    try:
        answer = await http.get(f"{instance.url}/ready", timeout=timeout)
        role = answer.json().get("relay")
    except (httpx.HTTPError, ValueError):
        return None
    return role if isinstance(role, str) else None


async def leaders(http: httpx.AsyncClient, service: str) -> list[Instance]:
    """The instances of ``service`` whose /ready says their relay leads, now."""
    found = await asyncio.gather(*(relay_role(http, i) for i in instances(service)))
    return [i for i, role in zip(instances(service), found, strict=True) if role == "leader"]


@dataclass(frozen=True)
class Round:
    """One look at every instance: when it started (monotonic seconds) and, by part name,
    what each /ready said of its relay (None: no answer)."""

    at: float
    roles: dict[str, str | None]

    def leading(self) -> list[str]:
        return sorted(part for part, role in self.roles.items() if role == "leader")


@dataclass
class LeaderHistory:
    """The rounds of one service, in order, and what they show."""

    service: str
    rounds: list[Round] = field(default_factory=list)

    def two_leaders(self) -> list[Round]:
        """Rounds in which more than one instance said it leads: never allowed."""
        return [r for r in self.rounds if len(r.leading()) > 1]

    def longest_leaderless_s(self) -> float:
        """The longest time from a round in which no instance said it leads to the next round
        in which one did (to the last round, when none did again): a leader's death seen
        from outside, plus the time it takes to ask."""
        longest, since = 0.0, None
        for r in self.rounds:
            if not r.leading():
                since = r.at if since is None else since
            elif since is not None:
                longest, since = max(longest, r.at - since), None
        if since is not None and self.rounds:
            longest = max(longest, self.rounds[-1].at - since)
        return longest


class LeaderWatch:
    """Asks every instance of every service who leads its relay, about every ``interval_s``
    (a round waits for its slowest answer), in the background, until closed."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.history = {s: LeaderHistory(s) for s in SERVICES}

    async def _look(self, http: httpx.AsyncClient) -> None:
        at = time.monotonic()
        every = [i for s in SERVICES for i in instances(s)]
        roles = await asyncio.gather(*(relay_role(http, i) for i in every))
        for service in SERVICES:
            self.history[service].rounds.append(Round(at, {
                i.part: role for i, role in zip(every, roles, strict=True)
                if i.service == service}))

    async def _run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient() as http:
            while not stop.is_set():
                started = time.monotonic()
                await self._look(http)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(),
                                           max(0.0, started + self.interval_s - time.monotonic()))

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[LeaderWatch]:
        stop = asyncio.Event()
        task = asyncio.create_task(self._run(stop))
        try:
            yield self
        finally:
            stop.set()
            await task
