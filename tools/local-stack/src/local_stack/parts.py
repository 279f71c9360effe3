"""The Python parts: the fake gateway, the services (migrated before they start) and, with
SAGA_NETPROXY=1, the TCP proxy the services then reach PostgreSQL, Kafka and the gateway through."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

from local_stack import gateway_key, kafka_auth, operator_signing, payment_token_keys
from local_stack.passwords import role_password
from local_stack.ports import refuse_taken_port
from local_stack.postgres.database import migrate
from local_stack.probes import http_ok
from local_stack.processes import alive, read_pid, spawn, stop_group, wait_for
from local_stack.settings import (
    GATEWAY_PORT,
    KAFKA_BOOTSTRAP,
    NETPROXY,
    PG_PORT,
    SERVICE_PORTS,
    STATE,
    dsn,
)
from netproxy import layout as proxy_ports  # the TCP proxy's ports, shared with the chaos suite


@dataclass
class PyPart:
    name: str
    module: str
    port: int
    env: dict[str, str] = field(default_factory=dict)

    def health_url(self) -> str:
        path = "/ready" if self.name in SERVICE_PORTS else "/health"
        return f"http://127.0.0.1:{self.port}{path}"


def service_env(service: str) -> dict[str, str]:
    env = {
        "SERVICE_NAME": service,
        "HTTP_HOST": "127.0.0.1",
        "HTTP_PORT": str(SERVICE_PORTS[service]),
        "DATABASE_URL": dsn(f"{service}_app", role_password(service, "app")),
        "KAFKA_BOOTSTRAP_SERVERS": KAFKA_BOOTSTRAP,
        "GATEWAY_URL": f"http://127.0.0.1:{GATEWAY_PORT}",
        "SAGA_OPERATOR_PUBLIC_KEYS": operator_signing.public_keys(),
        **kafka_auth.service_env(service),
        **payment_token_keys.service_env(service),
        **gateway_key.service_env(service),
    }
    if NETPROXY:
        env["DATABASE_URL"] = dsn(f"{service}_app", role_password(service, "app"),
                                  port=proxy_ports.route_port(service, "postgres"))
        env["KAFKA_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{proxy_ports.route_port(service, 'kafka')}"
        if service == "pagos":
            env["GATEWAY_URL"] = f"http://127.0.0.1:{proxy_ports.route_port(service, 'gateway')}"
    return env


def py_parts() -> list[PyPart]:
    gateway = PyPart("gateway", "fake_gateway", GATEWAY_PORT, {
        "GATEWAY_PORT": str(GATEWAY_PORT),
        "GATEWAY_LEDGER_PATH": str(STATE / "gateway" / "ledger.sqlite3"),
        **gateway_key.gateway_env(),
    })
    services = [PyPart(s, s, p, service_env(s)) for s, p in SERVICE_PORTS.items()]
    return [gateway, *([NETPROXY_PART] if NETPROXY else []), *services]


NETPROXY_PART = PyPart("netproxy", "netproxy", proxy_ports.CONTROL_PORT,
                       {"PG_PORT": str(PG_PORT), "GATEWAY_PORT": str(GATEWAY_PORT)})


# Passwords a person may have set for the stack's roles (docs/configuration.md): a service
# gets its own app role's in its DATABASE_URL and no other, least of all the admin's or a
# schema owner's (migrations run before, as a step of their own).
_STACK_PASSWORDS = re.compile(r"PG_ADMIN_PASSWORD|[A-Z]+_(OWNER|APP)_PASSWORD")


def inherited_env() -> dict[str, str]:
    """The stack's own environment, as the parts inherit it (test settings, tracing...),
    without the passwords of its database roles."""
    return {k: v for k, v in os.environ.items() if not _STACK_PASSWORDS.fullmatch(k)}


def start_py(part: PyPart, wait: bool = True) -> None:
    """``wait=False`` (chaos restarts): no migrations, no health wait; the part must recover
    by itself while other parts may still be down."""
    if alive(read_pid(part.name)) and http_ok(part.health_url()):
        return
    stop_group(part.name)
    refuse_taken_port(part.port, part.name)
    if wait and part.name in SERVICE_PORTS:
        migrate(part.name)
    env = {**inherited_env(), **part.env, "PYTHONUNBUFFERED": "1"}
    spawn(part.name, [sys.executable, "-m", part.module], env)
    if wait:
        wait_for(part.health_url(), lambda: http_ok(part.health_url()), 60, part.name)


def python_part(name: str) -> PyPart:
    """The Python part called ``name``, the TCP proxy included whether or not this shell runs it."""
    return next(p for p in [*py_parts(), NETPROXY_PART] if p.name == name)
