"""The proxy's ports as the local stack runs it: one route per instance of a service and per
dependency, and Kafka listeners the routes forward to. the local stack (``local_stack``) points the
services at these ports and the chaos suite names the routes; both read them from here.

A route is named ``<instance>-<dependency>``: the instance as the stack names its part
(``pedidos``, ``pedidos-2``) and the dependency as the stack names its part too (``postgres``,
``gateway``, ``registry``, and one route per broker: ``kafka``, ``kafka-2``, ``kafka-3``). So each instance
can be cut off on its own: a fault on ``pedidos-2-postgres`` leaves ``pedidos``' connections
alone, which is how a relay's leader is cut off while its standby is not.

Kafka needs one listener per proxied instance on every broker, advertised at that instance's
route to the broker, so that the broker connections a client opens after bootstrap also go
through the proxy. Every broker has them, whether or not the proxy runs (a test may put one
instance behind it later; a broker's listeners are fixed when it starts).
"""

from __future__ import annotations

import os

SERVICES = ("pedidos", "inventario", "pagos")
PROXY_BASE_PORT = int(os.environ.get("NETPROXY_BASE_PORT", "15400"))
CONTROL_PORT = PROXY_BASE_PORT
KAFKA_PROXIED_LISTENER_BASE = int(os.environ.get("KAFKA_PROXIED_LISTENER_BASE", "9094"))
# The local stack's numbering: instance k of a service, broker b, each 100 ports further
# (local_stack.settings.INSTANCE_PORT_STEP).
STEP = 100


def instance_part(service: str, instance: int = 1) -> str:
    """The stack's name for instance ``instance`` (1-based) of ``service``."""
    return service if instance == 1 else f"{service}-{instance}"


def broker_part(broker: int) -> str:
    return "kafka" if broker == 1 else f"kafka-{broker}"


def route_name(service: str, dependency: str, instance: int = 1, broker: int = 1) -> str:
    """``pedidos-postgres``, ``pedidos-2-kafka``, ``pagos-kafka-3``, ``pagos-2-gateway``…"""
    target = broker_part(broker) if dependency == "kafka" else dependency
    return f"{instance_part(service, instance)}-{target}"


def route_port(service: str, dependency: str, instance: int = 1, broker: int = 1) -> int:
    """Instance 1: pedidos-registry 15410, pedidos-postgres 15411, pedidos-kafka 15412,
    pedidos-gateway 15413, pedidos-kafka-2 15414, pedidos-kafka-3 15415; inventario's 1542x,
    pagos' 1543x. Instance k: the same + 100·(k−1)."""
    slot = {"registry": 0, "postgres": 1, "kafka": 2, "gateway": 3}[dependency]
    if dependency == "kafka" and broker > 1:
        slot = 2 + broker
    if not 0 <= slot <= 9:
        raise ValueError(f"the proxy's layout has routes for 7 brokers at most, not {broker}")
    return PROXY_BASE_PORT + STEP * (instance - 1) + 10 * (SERVICES.index(service) + 1) + slot


def kafka_listener_port(service: str, instance: int = 1, broker: int = 1) -> int:
    """The listener of broker ``broker`` that ``route_name(service, "kafka", instance, broker)``
    forwards to: 9094-9096 on broker 1 for instance 1 of each service, +10 per instance, +100
    per broker (between broker b's client, controller and TLS ports, 9092/9093/9097 + 100·(b−1))."""
    if instance > 9:
        raise ValueError(f"the proxy's layout has Kafka listeners for 9 instances, not {instance}")
    return (KAFKA_PROXIED_LISTENER_BASE + STEP * (broker - 1) + 10 * (instance - 1)
            + SERVICES.index(service))


def kafka_listener_name(service: str, instance: int = 1) -> str:
    return f"PROXIED_{instance_part(service, instance).upper().replace('-', '_')}"


def kafka_listeners(broker: int, replicas: int) -> list[tuple[str, int, int]]:
    """(name, port, advertised port) of broker ``broker``'s listeners for the proxy: one per
    instance of every service."""
    return [(kafka_listener_name(svc, k), kafka_listener_port(svc, k, broker),
             route_port(svc, "kafka", k, broker))
            for k in range(1, replicas + 1) for svc in SERVICES]


def kafka_bootstrap(service: str, instance: int, brokers: int) -> str:
    """``KAFKA_BOOTSTRAP_SERVERS`` for an instance behind the proxy: its route to every broker."""
    return ",".join(f"127.0.0.1:{route_port(service, 'kafka', instance, b)}"
                    for b in range(1, brokers + 1))


Routes = dict[str, tuple[int, str, int]]


def _dependency_routes(service: str, pg_port: int, gateway_port: int, instance: int,
                       brokers: int) -> Routes:
    """Instance ``instance`` of ``service``'s routes to PostgreSQL, to every broker and (pagos)
    to the gateway: name → (listen port, target host, target port)."""
    routes = {route_name(service, "postgres", instance): (
        route_port(service, "postgres", instance), "127.0.0.1", pg_port)}
    for b in range(1, brokers + 1):
        routes[route_name(service, "kafka", instance, b)] = (
            route_port(service, "kafka", instance, b), "127.0.0.1",
            kafka_listener_port(service, instance, b))
    if service == "pagos":
        routes[route_name(service, "gateway", instance)] = (
            route_port(service, "gateway", instance), "127.0.0.1", gateway_port)
    return routes


def _registry_route(service: str, registry_port: int, instance: int) -> Routes:
    return {route_name(service, "registry", instance): (
        route_port(service, "registry", instance), "127.0.0.1", registry_port)}


def service_routes(service: str, pg_port: int, gateway_port: int, registry_port: int,
                   instance: int = 1, brokers: int = 1) -> Routes:
    """Every route of instance ``instance`` of ``service``, the schema registry's included:
    what a test that puts one instance behind the proxy serves, so that every connection the
    instance opens (``SAGA_NETPROXY=1`` points it at all of these) finds its route."""
    return {**_dependency_routes(service, pg_port, gateway_port, instance, brokers),
            **_registry_route(service, registry_port, instance)}


def stack_routes(pg_port: int, gateway_port: int, replicas: int = 1, brokers: int = 1
                 ) -> Routes:
    """Every route of a stack of ``replicas`` instances of each service and ``brokers``
    brokers but the schema registry's (``registry_routes``): name → (listen port, target host,
    target port)."""
    return {name: route
            for k in range(1, replicas + 1) for svc in SERVICES
            for name, route in _dependency_routes(svc, pg_port, gateway_port, k, brokers).items()}


def registry_routes(registry_port: int, replicas: int = 1) -> Routes:
    """Every instance's route to the schema registry (``<instance>-registry``). Apart from
    ``stack_routes``, whose routes the chaos suite faults at random: the registry is faulted
    by the tests that mean it (tests/e2e/test_registered_schemas.py)."""
    return {name: route
            for k in range(1, replicas + 1) for svc in SERVICES
            for name, route in _registry_route(svc, registry_port, k).items()}


def instance_routes(part: str, dependency: str, brokers: int = 1) -> list[str]:
    """The routes that cut instance ``part`` (``pedidos-2``) off ``dependency``: its one route
    to PostgreSQL or the gateway, or its routes to every broker."""
    if dependency != "kafka":
        return [f"{part}-{dependency}"]
    return [f"{part}-{broker_part(b)}" for b in range(1, brokers + 1)]
