"""Where the stack under test listens (the same variables as deploy/local/stack.py)."""

from __future__ import annotations

import os
from pathlib import Path

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
PG_ADMIN_PASSWORD = os.environ.get("PG_ADMIN_PASSWORD", "saga_admin")


def admin_dsn() -> str:
    return f"postgresql://{PG_ADMIN_USER}:{PG_ADMIN_PASSWORD}@127.0.0.1:{PG_PORT}/{PG_DATABASE}"


def role_dsn(service: str, kind: str = "app") -> str:
    password = os.environ.get(f"{service.upper()}_{kind.upper()}_PASSWORD", f"{service}_{kind}")
    return f"postgresql://{service}_{kind}:{password}@127.0.0.1:{PG_PORT}/{PG_DATABASE}"
