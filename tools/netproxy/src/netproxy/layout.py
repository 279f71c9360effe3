"""The proxy's ports as the local stack runs it: one route per service and dependency, and one
Kafka listener per service. ``deploy/local/stack.py`` points the services at these ports and the
chaos suite names the routes; both read them from here."""

from __future__ import annotations

import os

SERVICES = ("pedidos", "inventario", "pagos")
PROXY_BASE_PORT = int(os.environ.get("NETPROXY_BASE_PORT", "15400"))
CONTROL_PORT = PROXY_BASE_PORT
# Kafka needs one listener per proxied service, advertised at that service's proxy port, so
# that the broker connections the client opens after bootstrap also go through the proxy.
KAFKA_PROXIED_LISTENER_BASE = int(os.environ.get("KAFKA_PROXIED_LISTENER_BASE", "9094"))


def route_port(service: str, dependency: str) -> int:
    """pedidos-postgres 15411, pedidos-kafka 15412, inventario-postgres 15421, …"""
    return (PROXY_BASE_PORT + 10 * (SERVICES.index(service) + 1)
            + ("postgres", "kafka", "gateway").index(dependency) + 1)


def kafka_listener_port(service: str) -> int:
    return KAFKA_PROXIED_LISTENER_BASE + SERVICES.index(service)


def kafka_listener_name(service: str) -> str:
    return f"PROXIED_{service.upper()}"


def stack_routes(pg_port: int, gateway_port: int) -> dict[str, tuple[int, str, int]]:
    routes: dict[str, tuple[int, str, int]] = {}
    for svc in SERVICES:
        routes[f"{svc}-postgres"] = (route_port(svc, "postgres"), "127.0.0.1", pg_port)
        routes[f"{svc}-kafka"] = (route_port(svc, "kafka"), "127.0.0.1", kafka_listener_port(svc))
    routes["pagos-gateway"] = (route_port("pagos", "gateway"), "127.0.0.1", gateway_port)
    return routes
