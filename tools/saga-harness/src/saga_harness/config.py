"""Where the stack under test listens (the same variables as the local stack,
``local_stack.settings``), and the credentials it generated for itself (local_stack.passwords:
a password set in the environment, or else the one under ``.local/secrets/``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from local_stack import gateway_key
from local_stack.passwords import (
    known_admin_password,
    known_reader_password,
    known_role_password,
    reader_role,
)
from local_stack.settings import SERVICE_PORTS, metrics_port
from sagakit.kafka import client_security
from sagakit.settings import KafkaClientSettings

# The checkout: the workspace installs this package from its source (tools/saga-harness/src).
ROOT = Path(__file__).resolve().parents[4]
PEDIDOS = f"http://127.0.0.1:{os.environ.get('PEDIDOS_PORT', '8001')}"
INVENTARIO = f"http://127.0.0.1:{os.environ.get('INVENTARIO_PORT', '8002')}"
PAGOS = f"http://127.0.0.1:{os.environ.get('PAGOS_PORT', '8003')}"
# Each service's metrics-only port (its first instance's), which answers with no token.
METRICS = {service: f"http://127.0.0.1:{metrics_port(service)}" for service in SERVICE_PORTS}
GATEWAY = f"http://127.0.0.1:{os.environ.get('GATEWAY_PORT', '8010')}"
IDENTITY = f"http://127.0.0.1:{os.environ.get('IDENTITY_PORT', '8020')}"
CONSOLA = f"http://127.0.0.1:{os.environ.get('CONSOLA_PORT', '8030')}"
# Every broker of the stack (SAGA_KAFKA_BROKERS; broker k on KAFKA_PORT + 100·(k−1)), so that a
# test's client bootstraps with one of them down; KAFKA_TLS, their SASL_SSL listeners.
_BROKERS = range(int(os.environ.get("SAGA_KAFKA_BROKERS", "1")))
KAFKA = ",".join(f"127.0.0.1:{int(os.environ.get('KAFKA_PORT', '9092')) + 100 * k}"
                 for k in _BROKERS)
KAFKA_TLS = ",".join(f"127.0.0.1:{int(os.environ.get('KAFKA_TLS_PORT', '9097')) + 100 * k}"
                     for k in _BROKERS)
# The stack's Kafka authenticates every client (SASL/SCRAM) and authorizes it by ACLs, unless it
# was started with SAGA_KAFKA_AUTH=0; the tests speak as the stack's admin principal unless
# KAFKA_SASL_* say otherwise.
KAFKA_AUTH = os.environ.get("SAGA_KAFKA_AUTH", "1") != "0"
STATE = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local"))
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


def admin_url_through(port: int) -> str:
    """The admin's SQLAlchemy URL reaching PostgreSQL through a local port (a route of the
    project's TCP proxy, which a test can then blackhole or cut)."""
    dsn = admin_dsn().replace(f"127.0.0.1:{PG_PORT}", f"127.0.0.1:{port}")
    return dsn.replace("postgresql://", "postgresql+asyncpg://")


def role_dsn(service: str, kind: str = "app") -> str:
    role = f"{service}_{kind}"
    password = _made(known_role_password(service, kind), role)
    return f"postgresql://{role}:{password}@127.0.0.1:{PG_PORT}/{PG_DATABASE}"

def reader_dsn(consumer: str) -> str:
    """The login role of a read views' consumer (``console``, ``sagactl``, ``grafana``)."""
    role = reader_role(consumer)
    password = _made(known_reader_password(consumer), role)
    return f"postgresql://{role}:{password}@127.0.0.1:{PG_PORT}/{PG_DATABASE}"


def stack_secret(name: str) -> str:
    """A secret the local stack generated for itself (``local_stack.secrets``)."""
    path = STATE / "secrets" / name
    try:
        return path.read_text()
    except FileNotFoundError:
        raise AssertionError(f"the local stack has no secret {name} ({path}): is it up?") from None


def gateway_auth() -> dict[str, str]:
    """The header that the fake gateway requires on every call, its ledger included: the
    secret key the stack generated for it (``local_stack.gateway_key``)."""
    return {"Authorization": f"Bearer {stack_secret(gateway_key.SECRET)}"}


def kafka_fields(principal: str | None = None) -> dict[str, Any]:
    """``KafkaClientSettings`` fields (``MessagingSettings`` takes them too) for a client of the
    stack under test: as ``principal`` (``admin``, ``pedidos``...) with its password from the
    stack's secrets; without one, as the ``KAFKA_*`` environment says, or as the admin on a stack
    with authentication when it says nothing."""
    if principal is None:
        if not KAFKA_AUTH or os.environ.get("KAFKA_SASL_USERNAME"):
            return {**KafkaClientSettings().model_dump(exclude={"kafka_bootstrap_servers"}),
                    "kafka_bootstrap_servers": KAFKA}
        principal = "admin"
    return {"kafka_bootstrap_servers": KAFKA, "kafka_security_protocol": "SASL_PLAINTEXT",
            "kafka_sasl_mechanism": "SCRAM-SHA-512", "kafka_sasl_username": principal,
            "kafka_sasl_password": stack_secret(f"kafka-{principal}")}


def kafka_client(principal: str | None = None) -> dict[str, Any]:
    """aiokafka arguments (``bootstrap_servers`` and security) for ``kafka_fields(principal)``."""
    return client_security(KafkaClientSettings(**kafka_fields(principal)))


def scratch_topic(name: str, partitions: int) -> Any:
    """A test's own topic, with the copies the stack's topics have (``min.insync.replicas`` of
    a cluster of three would refuse every write to a topic of one copy)."""
    from local_stack.settings import topic_settings

    return topic_settings().new_topic(name, partitions)
