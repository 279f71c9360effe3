"""The operator console (services/consola) as a part of the local stack: its port, the key that
signs its session cookie (made at the stack's first start like the stack's other secrets, and
handed to it as a file), the issuer it signs operators in through, the APIs it calls with
their tokens, and the published read views it reads as ``console_reader`` (the password the
stack generated for that role, and nothing else of the database). Its replays are signed with
a key of its own (``operator_signing``), and published as the ``operator`` Kafka principal."""

from __future__ import annotations

import secrets as random

from local_stack import identity, kafka_auth, operator_signing, secrets
from local_stack.passwords import reader_password, reader_role
from local_stack.postgres.tls import with_stack_tls
from local_stack.settings import CONSOLA_PORT, SERVICE_PORTS, dsn

SESSION_KEY = "consola-session"


def console_env() -> dict[str, str]:
    secrets.stored(SESSION_KEY, lambda: random.token_urlsafe(48).encode())
    return {"CONSOLA_HOST": "127.0.0.1", "CONSOLA_PORT": str(CONSOLA_PORT),
            "CONSOLA_PUBLIC_URL": f"http://127.0.0.1:{CONSOLA_PORT}",
            "CONSOLA_SESSION_SECRET_FILE": str(secrets.path_of(SESSION_KEY)),
            "CONSOLA_PEDIDOS_URL": f"http://127.0.0.1:{SERVICE_PORTS['pedidos']}",
            "CONSOLA_PAGOS_URL": f"http://127.0.0.1:{SERVICE_PORTS['pagos']}",
            "CONSOLA_INVENTARIO_URL": f"http://127.0.0.1:{SERVICE_PORTS['inventario']}",
            "CONSOLA_DATABASE_URL": with_stack_tls(dsn(
                reader_role("console"), reader_password("console"), driver="postgresql")),
            "CONSOLA_SIGNING_KEY_FILE": str(operator_signing.console_key_file()),
            **kafka_auth.service_env(kafka_auth.OPERATOR),
            **identity.service_env()}
