"""What ``make credentials`` prints: the credentials the local stack generated for itself, as one
JSON object in the shape the black-box contract gives (docs/operations.md, "Credentials").

Nothing is generated here, only read: a value the stack has not made (it never started) or
does not use (a part it does not run) is null. A password set in the environment wins over the
generated one, as it does for the stack itself.
"""

from __future__ import annotations

import os
from typing import Any

from local_stack import gateway_key, identity, kafka_auth, secrets
from local_stack.passwords import READERS, known_admin_password, known_reader_password, reader_role
from local_stack.registry import principals as registry_principals
from local_stack.registry import server as registry
from local_stack.settings import KAFKA_BOOTSTRAP, PG_ADMIN, PG_PORT, SERVICE_PORTS, dsn

# Kafka's principals: the operator's and one per service, each with the password the stack
# made for it under ``kafka-<name>`` when the broker authenticates its clients.
KAFKA_PRINCIPALS = ("admin", *SERVICE_PORTS)


def _principal(name: str) -> dict[str, str] | None:
    password = secrets.existing(f"kafka-{name}")
    return None if password is None else {"username": name, "password": password}


def _kafka() -> dict[str, Any]:
    return {
        "bootstrap": KAFKA_BOOTSTRAP,
        # What the stack's own clients use (SAGA_KAFKA_AUTH=1: SASL/SCRAM), unless the
        # environment names another.
        "security_protocol": (os.environ.get("KAFKA_SECURITY_PROTOCOL")
                              or kafka_auth.client_protocol()),
        "sasl_mechanism": (os.environ.get("KAFKA_SASL_MECHANISM")
                           or (kafka_auth.MECHANISM if kafka_auth.KAFKA_AUTH else None)),
        "principals": {name: _principal(name) for name in KAFKA_PRINCIPALS},
    }


def _reader_dsn(consumer: str) -> str | None:
    password = known_reader_password(consumer)
    return None if password is None else dsn(reader_role(consumer), password,
                                             driver="postgresql", port=PG_PORT)


def _schema_registry() -> dict[str, Any]:
    def principal(name: str) -> dict[str, str] | None:
        password = registry_principals.known_password(name)
        return None if password is None else {"username": name, "password": password}

    return {"url": registry.API_URL, "ccompat_url": registry.CCOMPAT_URL,
            # HTTP basic authentication: the deployer registers, the reader reads.
            "principals": {name: principal(name) for name in registry_principals.PRINCIPALS}}


def credentials() -> dict[str, Any]:
    admin = known_admin_password()
    return {
        "postgres": {
            "admin_dsn": None if admin is None else dsn(PG_ADMIN, admin, driver="postgresql",
                                                        port=PG_PORT),
            # The read views' consumers (console, sagactl, grafana): each reads the services'
            # published views and nothing else.
            "reader_dsns": {consumer: _reader_dsn(consumer) for consumer in READERS},
        },
        "kafka": _kafka(),
        "gateway": {"secret_key": secrets.existing(gateway_key.SECRET)},
        "schema_registry": _schema_registry(),
        # Not a secret: the local identity provider hands a token to whoever asks.
        "identity": {"token_url": identity.token_url()},
    }
