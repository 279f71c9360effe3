"""Where the stack under test listens (the same variables as deploy/local/stack.py), and the
credentials it generated for itself (local_stack.passwords: a password set in the environment,
or else the one under ``.local/secrets/``)."""

from __future__ import annotations

import os
from pathlib import Path

from local_stack.passwords import known_admin_password, known_role_password

# The checkout: the workspace installs this package from its source (tools/saga-harness/src).
ROOT = Path(__file__).resolve().parents[4]
PEDIDOS = f"http://127.0.0.1:{os.environ.get('PEDIDOS_PORT', '8001')}"
INVENTARIO = f"http://127.0.0.1:{os.environ.get('INVENTARIO_PORT', '8002')}"
PAGOS = f"http://127.0.0.1:{os.environ.get('PAGOS_PORT', '8003')}"
GATEWAY = f"http://127.0.0.1:{os.environ.get('GATEWAY_PORT', '8010')}"
KAFKA = f"127.0.0.1:{os.environ.get('KAFKA_PORT', '9092')}"
PG_PORT = int(os.environ.get("PG_PORT", "25432"))
PG_DATABASE = os.environ.get("PG_DATABASE", "saga")
PG_ADMIN_USER = os.environ.get("PG_ADMIN_USER", "saga_admin")


def _made(password: str | None, role: str) -> str:
    if password is None:
        raise RuntimeError(f"no password for the role {role}: the local stack generates it "
                           "when it starts PostgreSQL (`make up`; for a stack started before it "
                           "generated its passwords, `make down` first)")
    return password


def admin_dsn() -> str:
    password = _made(known_admin_password(), PG_ADMIN_USER)
    return f"postgresql://{PG_ADMIN_USER}:{password}@127.0.0.1:{PG_PORT}/{PG_DATABASE}"


def role_dsn(service: str, kind: str = "app") -> str:
    role = f"{service}_{kind}"
    password = _made(known_role_password(service, kind), role)
    return f"postgresql://{role}:{password}@127.0.0.1:{PG_PORT}/{PG_DATABASE}"
