"""The Python parts: the identity provider, the fake gateway, the services (migrated before they
start), the operator console and, with SAGA_NETPROXY=1, the TCP proxy the services then reach
PostgreSQL, Kafka and the gateway through.

With SAGA_REPLICAS=N each service runs N instances, each a full member: its HTTP server, a
consumer in the service's group, a relay candidate and the periodic jobs, against the same
schema. Instance k (1-based) is the part ``<service>`` (k = 1) or ``<service>-k`` and listens
on the service's port + 100·(k−1) (README.md, Where things listen)."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

from local_stack import (
    fingerprint_key,
    gateway_key,
    identity,
    kafka_auth,
    operator_console,
    operator_signing,
    payment_token_keys,
)
from local_stack.passwords import role_password
from local_stack.ports import refuse_taken_port
from local_stack.postgres.database import migrate
from local_stack.postgres.tls import with_stack_tls
from local_stack.probes import http_ok
from local_stack.processes import alive, read_pid, spawn, stop_group, wait_for
from local_stack.registry import principals as registry_principals
from local_stack.registry.server import api_url as registry_api_url
from local_stack.settings import (
    CONSOLA_PORT,
    GATEWAY_PORT,
    IDENTITY_PORT,
    KAFKA_BROKERS,
    NETPROXY,
    PG_PORT,
    REGISTRY_PORT,
    REPLICAS,
    SERVICE_PORTS,
    STATE,
    dsn,
    instance_port,
    metrics_port,
)
from netproxy import layout as proxy_ports  # the TCP proxy's ports, shared with the chaos suite


@dataclass
class PyPart:
    name: str
    module: str
    port: int
    env: dict[str, str] = field(default_factory=dict)
    service: str | None = None
    """The service this part is an instance of; None for the gateway and the proxy."""
    instance: int = 1

    def health_url(self) -> str:
        path = "/ready" if self.service else "/health"
        return f"http://127.0.0.1:{self.port}{path}"


def instance_part_name(service: str, k: int) -> str:
    return service if k == 1 else f"{service}-{k}"


def service_env(service: str, k: int = 1) -> dict[str, str]:
    env = {
        "SERVICE_NAME": service,
        "HTTP_HOST": "127.0.0.1",
        "HTTP_PORT": str(instance_port(SERVICE_PORTS[service], k)),
        # Prometheus scrapes this one, with no token (local_stack.prometheus).
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORT": str(metrics_port(service, k)),
        # Names its relay's connection (<service>-relay@<k>): who leads shows in pg_stat_activity.
        "SAGA_INSTANCE": str(k),
        "DATABASE_URL": with_stack_tls(dsn(f"{service}_app", role_password(service, "app"))),
        "GATEWAY_URL": f"http://127.0.0.1:{GATEWAY_PORT}",
        "SAGA_OPERATOR_PUBLIC_KEYS": operator_signing.public_keys(),
        **identity.service_env(),
        **kafka_auth.service_env(service),
        **payment_token_keys.service_env(service),
        **gateway_key.service_env(service),
        **fingerprint_key.service_env(service),
        **registry_reader_env(),
    }
    if NETPROXY:
        # Each instance through routes of its own (netproxy.layout), so that one instance can
        # be cut off while the others are not.
        env["DATABASE_URL"] = with_stack_tls(dsn(
            f"{service}_app", role_password(service, "app"),
            port=proxy_ports.route_port(service, "postgres", k)))
        env["KAFKA_BOOTSTRAP_SERVERS"] = proxy_ports.kafka_bootstrap(service, k, KAFKA_BROKERS)
        env["SCHEMA_REGISTRY_URL"] = registry_api_url(
            proxy_ports.route_port(service, "registry", k))
        if service == "pagos":
            env["GATEWAY_URL"] = (
                f"http://127.0.0.1:{proxy_ports.route_port(service, 'gateway', k)}")
    return env


def registry_reader_env() -> dict[str, str]:
    """Where a service reads the event schemas (sagakit.schema_registry), as the registry's
    ``reader``."""
    return {"SCHEMA_REGISTRY_URL": registry_api_url(),
            "SCHEMA_REGISTRY_USERNAME": "reader",
            "SCHEMA_REGISTRY_PASSWORD": registry_principals.password("reader")}


def py_parts() -> list[PyPart]:
    # First: the services fetch its keys as they start.
    identity_provider = PyPart("identity", "identity_provider", IDENTITY_PORT,
                               identity.provider_env())
    gateway = PyPart("gateway", "fake_gateway", GATEWAY_PORT, {
        "GATEWAY_PORT": str(GATEWAY_PORT),
        "GATEWAY_LEDGER_PATH": str(STATE / "gateway" / "ledger.sqlite3"),
        **gateway_key.gateway_env(),
    })
    # Last: it calls the services' APIs.
    console = PyPart("consola", "consola", CONSOLA_PORT, operator_console.console_env())
    return [identity_provider, gateway, *([NETPROXY_PART] if NETPROXY else []),
            *service_parts(), console]


def service_parts(replicas: int = REPLICAS) -> list[PyPart]:
    """Every instance of every service, instance by instance (the first of each service
    first: ``up`` starts them in this order)."""
    return [PyPart(instance_part_name(s, k), s, instance_port(p, k), service_env(s, k), s, k)
            for k in range(1, replicas + 1) for s, p in SERVICE_PORTS.items()]


# Its routes follow the stack's shape: every instance's (SAGA_REPLICAS), to every broker
# (SAGA_KAFKA_BROKERS); it inherits both from the stack's environment.
NETPROXY_PART = PyPart("netproxy", "netproxy", proxy_ports.CONTROL_PORT,
                       {"PG_PORT": str(PG_PORT), "GATEWAY_PORT": str(GATEWAY_PORT),
                        "REGISTRY_PORT": str(REGISTRY_PORT)})


# Passwords a person may have set for the stack's roles (docs/configuration.md): a service
# gets its own app role's in its DATABASE_URL and no other, least of all the admin's or a
# schema owner's (migrations run before, as a step of their own), nor the schema registry's.
_STACK_PASSWORDS = re.compile(
    r"PG_ADMIN_PASSWORD|[A-Z]+_(OWNER|APP|READER)_PASSWORD|REGISTRY_[A-Z]+_PASSWORD")


def inherited_env() -> dict[str, str]:
    """The stack's own environment, as the parts inherit it (test settings, tracing...),
    without the passwords of its database roles."""
    return {k: v for k, v in os.environ.items() if not _STACK_PASSWORDS.fullmatch(k)}


def start_py(part: PyPart, wait: bool = True, until_ready: bool = True) -> None:
    """``wait=False`` (chaos restarts): no migrations, no health wait; the part must recover
    by itself while other parts may still be down. ``until_ready=False``: migrated, started,
    not waited for (``wait_ready``)."""
    if alive(read_pid(part.name)) and http_ok(part.health_url()):
        return
    stop_group(part.name)
    refuse_taken_port(part.port, part.name)
    if part.service:
        refuse_taken_port(metrics_port(part.service, part.instance), f"{part.name} (metrics)")
    if wait and part.service:
        # Serialised with any instance migrating at the same moment (sagakit.store.alembic_env).
        migrate(part.service)
    env = {**inherited_env(), **part.env, "PYTHONUNBUFFERED": "1"}
    spawn(part.name, [sys.executable, "-m", part.module], env)
    if wait and until_ready:
        wait_ready(part)


def wait_ready(part: PyPart) -> None:
    wait_for(part.health_url(), lambda: http_ok(part.health_url()), 60, part.name)


def python_part(name: str) -> PyPart:
    """The Python part called ``name``, the TCP proxy included whether or not this shell runs it."""
    return next(p for p in [*py_parts(), NETPROXY_PART] if p.name == name)
