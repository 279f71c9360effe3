"""What a fault names, resolved when it strikes: a part of the stack, a proxy route, or an
instance chosen by the role its relay plays at that moment.

    pedidos@leader            the pedidos instance whose relay leads (its /ready says so)
    inventario@standby        an inventario instance whose relay stands by; with one
                              instance, that one (a consumer like any other)
    pedidos@leader-postgres   that instance's route to PostgreSQL (netproxy.layout)
    pedidos@leader-kafka      its routes to every Kafka broker
    pagos-2-gateway           a route by its name; pagos-2-kafka: every broker's route

Who leads is asked at the moment of the fault, not when the schedule is written: a stack that
was just restarted, or a previous fault, may have moved the lead.
"""

from __future__ import annotations

import httpx

from netproxy import layout
from saga_harness import replicas
from saga_harness.waiting import wait_for

ROLES = ("leader", "standby")
DEPENDENCIES = ("postgres", "kafka", "gateway")


def split_route(spec: str) -> tuple[str, str]:
    """``pedidos@leader-kafka`` → (``pedidos@leader``, ``kafka``); a route name of one broker
    (``pedidos-kafka-2``) is not split: it names itself."""
    instance, _, dependency = spec.rpartition("-")
    if not instance or dependency not in DEPENDENCIES:
        raise ValueError(f"{spec!r} names no instance's route to {'/'.join(DEPENDENCIES)}")
    return instance, dependency


async def instance(spec: str, http: httpx.AsyncClient, timeout_s: float = 30.0) -> str:
    """The part ``spec`` names: itself, or the instance of ``<service>@<role>`` now."""
    service, at, role = spec.partition("@")
    if not at:
        return spec
    if role not in ROLES or service not in replicas.SERVICES:
        raise ValueError(f"{spec!r}: expected <service>@{'|'.join(ROLES)}")
    every = replicas.instances(service)
    leading = await wait_for(lambda: replicas.leaders(http, service), lambda ls: len(ls) == 1,
                             timeout=timeout_s, what=f"one relay leader of {service}")
    if role == "leader":
        return leading[0].part
    others = [i for i in every if i != leading[0]]
    return (others or every)[0].part


async def routes(spec: str, http: httpx.AsyncClient, known: set[str]) -> list[str]:
    """The proxy routes ``spec`` names (``known``: every route the proxy has)."""
    if spec in known:
        return [spec]
    part, dependency = split_route(spec)
    brokers = replicas.kafka_brokers()
    found = layout.instance_routes(await instance(part, http), dependency, brokers)
    missing = [r for r in found if r not in known]
    if missing:
        raise ValueError(f"the proxy has no route {missing} (for {spec!r}); is the stack "
                         "started with SAGA_NETPROXY=1 and as many replicas?")
    return found
