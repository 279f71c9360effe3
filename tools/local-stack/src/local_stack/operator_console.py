"""The operator console (services/consola) as a part of the local stack: its port, the key that
signs its session cookie (made at the stack's first start like the stack's other secrets, and
handed to it as a file), the issuer it signs operators in through, and the APIs it calls with
their tokens."""

from __future__ import annotations

import secrets as random

from local_stack import identity, secrets
from local_stack.settings import CONSOLA_PORT, SERVICE_PORTS

SESSION_KEY = "consola-session"


def console_env() -> dict[str, str]:
    secrets.stored(SESSION_KEY, lambda: random.token_urlsafe(48).encode())
    return {"CONSOLA_HOST": "127.0.0.1", "CONSOLA_PORT": str(CONSOLA_PORT),
            "CONSOLA_PUBLIC_URL": f"http://127.0.0.1:{CONSOLA_PORT}",
            "CONSOLA_SESSION_SECRET_FILE": str(secrets.path_of(SESSION_KEY)),
            "CONSOLA_PEDIDOS_URL": f"http://127.0.0.1:{SERVICE_PORTS['pedidos']}",
            "CONSOLA_PAGOS_URL": f"http://127.0.0.1:{SERVICE_PORTS['pagos']}",
            **identity.service_env()}
