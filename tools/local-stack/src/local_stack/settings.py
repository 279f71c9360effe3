"""Where the stack keeps its state and which ports its parts listen on: every variable the stack
reads from its environment (docs/configuration.md, "Local stack")."""

from __future__ import annotations

import os
from pathlib import Path

# The checkout: the workspace installs this package from its source (tools/local-stack/src).
ROOT = Path(__file__).resolve().parents[4]

STATE = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local")).resolve()
LOGS = STATE / "logs"
RUN = STATE / "run"
KAFKA_DIR = Path(os.environ.get("SAGA_KAFKA_HOME", STATE / "kafka"))

# Below Linux's ephemeral range (32768-60999) and the IANA dynamic range (49152-65535): a port
# in it can be taken by any outgoing connection, even a service's own reconnect to it while
# PostgreSQL is down (a TCP self-connect), and then PostgreSQL cannot bind it for a minute.
PG_PORT = int(os.environ.get("PG_PORT", "25432"))
PG_DB = os.environ.get("PG_DATABASE", "saga")
PG_ADMIN = os.environ.get("PG_ADMIN_USER", "saga_admin")
# The passwords are not settings with a default: the stack generates them (passwords.py).
KAFKA_PORT = int(os.environ.get("KAFKA_PORT", "9092"))
KAFKA_CONTROLLER_PORT = int(os.environ.get("KAFKA_CONTROLLER_PORT", "9093"))
GATEWAY_PORT = int(os.environ.get("GATEWAY_PORT", "8010"))
IDENTITY_PORT = int(os.environ.get("IDENTITY_PORT", "8020"))
SERVICE_PORTS = {
    "pedidos": int(os.environ.get("PEDIDOS_PORT", "8001")),
    "inventario": int(os.environ.get("INVENTARIO_PORT", "8002")),
    "pagos": int(os.environ.get("PAGOS_PORT", "8003")),
}
PROMETHEUS_PORT = int(os.environ.get("PROMETHEUS_PORT", "9090"))
KAFKA_BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"
# SAGA_NETPROXY=1: every service reaches PostgreSQL, Kafka and the gateway through the TCP proxy
# of tools/netproxy, which the chaos suite drives to add latency, black holes and resets.
NETPROXY = os.environ.get("SAGA_NETPROXY") == "1"
# SAGA_KAFKA_AUTH=1: Kafka authenticates every client with SASL/SCRAM and authorizes it by ACLs
# (local_stack.kafka_auth); off by default until every suite has run against it.
KAFKA_AUTH = os.environ.get("SAGA_KAFKA_AUTH") == "1"
TOPIC_PARTITIONS = int(os.environ.get("KAFKA_TOPIC_PARTITIONS", "6"))
UP_DEADLINE_S = float(os.environ.get("STACK_UP_TIMEOUT", "120"))
# How long ``up`` waits for what a crashed PostgreSQL left behind (its orphaned backends, the
# port) before it gives up.
PG_CRASH_WAIT_S = float(os.environ.get("STACK_PG_CRASH_WAIT", "60"))
# A part's log is moved aside (one older generation kept, ``<part>.log.1``) when the part
# starts and the log has grown past this: a day of benchmarks wrote 930 MB into pedidos' log.
LOG_ROTATE_BYTES = int(os.environ.get("STACK_LOG_ROTATE_MB", "200")) * 2**20


def prometheus_requested() -> bool:
    """WITH_PROMETHEUS=1 asks ``up`` and ``run`` for Prometheus, as ``--prometheus`` does."""
    return os.environ.get("WITH_PROMETHEUS") == "1"


def dsn(user: str, password: str, driver: str = "postgresql+asyncpg", port: int = PG_PORT) -> str:
    return f"{driver}://{user}:{password}@127.0.0.1:{port}/{PG_DB}"
