"""Where the stack keeps its state and which ports its parts listen on: every variable the stack
reads from its environment (docs/configuration.md, "Local stack")."""

from __future__ import annotations

import os
from pathlib import Path

from sagakit.kafka_topics import TopicSettings

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
# SASL/SCRAM over TLS (local_stack.kafka_tls), beside the SASL_PLAINTEXT listener of KAFKA_PORT.
KAFKA_TLS_PORT = int(os.environ.get("KAFKA_TLS_PORT", "9097"))
GATEWAY_PORT = int(os.environ.get("GATEWAY_PORT", "8010"))
# The defaults are also what docker-compose.yml and the Kubernetes manifests (deploy/k8s) use,
# whatever this shell sets: deploy/tests check that the three deployments agree on them.
DEFAULT_SERVICE_PORTS = {"pedidos": 8001, "inventario": 8002, "pagos": 8003}
IDENTITY_PORT = int(os.environ.get("IDENTITY_PORT", "8020"))
DEFAULT_CONSOLA_PORT = 8030
CONSOLA_PORT = int(os.environ.get("CONSOLA_PORT", "8030"))
SERVICE_PORTS = {
    "pedidos": int(os.environ.get("PEDIDOS_PORT", str(DEFAULT_SERVICE_PORTS["pedidos"]))),
    "inventario": int(os.environ.get("INVENTARIO_PORT", str(DEFAULT_SERVICE_PORTS["inventario"]))),
    "pagos": int(os.environ.get("PAGOS_PORT", str(DEFAULT_SERVICE_PORTS["pagos"]))),
}
PROMETHEUS_PORT = int(os.environ.get("PROMETHEUS_PORT", "9090"))
# The schema registry (Apicurio Registry, local_stack.registry): its REST APIs on REGISTRY_PORT,
# its health checks and metrics on a management port of their own (Quarkus' management
# interface), 1000 above it like the services' metrics ports.
REGISTRY_PORT = int(os.environ.get("REGISTRY_PORT", "8081"))
REGISTRY_MANAGEMENT_PORT = int(os.environ.get("REGISTRY_MANAGEMENT_PORT", "9081"))
REGISTRY_DIR = STATE / "registry"
# How long ``up`` waits for the registry to answer its readiness check: a JVM, which migrates
# its tables on the first start.
REGISTRY_START_S = float(os.environ.get("REGISTRY_START_TIMEOUT", "180"))
# Each instance also serves its metrics, with no token, on a port of their own (loopback only:
# Prometheus scrapes them), its HTTP port + METRICS_PORT_OFFSET: pedidos 9001, inventario 9002,
# pagos 9003, then + 100 per instance like the HTTP ports. docker-compose.yml and the
# Kubernetes manifests use the same ports.
METRICS_PORT_OFFSET = 1000
# SAGA_REPLICAS=N: N instances of each service; instance k (1-based) listens on its base port
# + 100·(k−1) (README.md, Where things listen). SAGA_KAFKA_BROKERS=N: N KRaft brokers, each also a voter
# of the controller quorum; broker k on KAFKA_PORT + 100·(k−1), its controller listener on
# KAFKA_CONTROLLER_PORT + 100·(k−1), its TLS listener on KAFKA_TLS_PORT + 100·(k−1)
# (local_stack.kafka_cluster).
INSTANCE_PORT_STEP = 100
REPLICAS = int(os.environ.get("SAGA_REPLICAS", "1"))
KAFKA_BROKERS = int(os.environ.get("SAGA_KAFKA_BROKERS", "1"))
if REPLICAS < 1 or KAFKA_BROKERS < 1:
    raise SystemExit("[stack] SAGA_REPLICAS and SAGA_KAFKA_BROKERS must be 1 or more")


def instance_port(base: int, k: int) -> int:
    """The port of instance (or broker) ``k``, 1-based, of a part whose first listens on
    ``base``."""
    return base + INSTANCE_PORT_STEP * (k - 1)


def metrics_port(service: str, k: int = 1, ports: dict[str, int] = SERVICE_PORTS) -> int:
    """The metrics-only port of instance ``k`` of ``service``."""
    return instance_port(ports[service] + METRICS_PORT_OFFSET, k)


# Every broker: a client that bootstraps from them all still finds the cluster with one down.
KAFKA_BOOTSTRAP = ",".join(f"127.0.0.1:{instance_port(KAFKA_PORT, k)}"
                           for k in range(1, KAFKA_BROKERS + 1))
KAFKA_TLS_BOOTSTRAP = ",".join(f"127.0.0.1:{instance_port(KAFKA_TLS_PORT, k)}"
                               for k in range(1, KAFKA_BROKERS + 1))
# SAGA_NETPROXY=1: every service reaches PostgreSQL, Kafka and the gateway through the TCP proxy
# of tools/netproxy, which the chaos suite drives to add latency, black holes and resets.
NETPROXY = os.environ.get("SAGA_NETPROXY") == "1"
# Kafka authenticates every client with SASL/SCRAM and authorizes it by ACLs
# (local_stack.kafka_auth); SAGA_KAFKA_AUTH=0 runs it PLAINTEXT with no ACLs, to debug with
# clients that cannot authenticate.
KAFKA_AUTH = os.environ.get("SAGA_KAFKA_AUTH", "1") != "0"
# SAGA_KAFKA_TLS=1: the services reach Kafka on its TLS listener (SASL_SSL) instead.
KAFKA_TLS = os.environ.get("SAGA_KAFKA_TLS") == "1"
# SAGA_PG_TLS=1: PostgreSQL speaks TLS with a certificate of the stack's own CA, and the
# services connect with sslmode=verify-full (local_stack.postgres.tls).
PG_TLS = os.environ.get("SAGA_PG_TLS") == "1"
UP_DEADLINE_S = float(os.environ.get("STACK_UP_TIMEOUT", "120"))
# How long ``up`` waits for what a crashed PostgreSQL left behind (its orphaned backends, the
# port) before it gives up.
PG_CRASH_WAIT_S = float(os.environ.get("STACK_PG_CRASH_WAIT", "60"))
# A part's log is moved aside (one older generation kept, ``<part>.log.1``) when the part
# starts and the log has grown past this: a day of benchmarks wrote 930 MB into pedidos' log.
LOG_ROTATE_BYTES = int(os.environ.get("STACK_LOG_ROTATE_MB", "200")) * 2**20
# make backup / make restore (local_stack.postgres.backup): base backups kept, the recovery's
# deadline, and the time to recover to (unset: the latest there is).
BACKUP_KEEP = int(os.environ.get("SAGA_BACKUP_KEEP", "2"))
RESTORE_TIMEOUT_S = float(os.environ.get("SAGA_RESTORE_TIMEOUT", "600"))
RESTORE_TARGET_TIME = os.environ.get("RESTORE_TARGET_TIME")


def prometheus_requested() -> bool:
    """WITH_PROMETHEUS=1 asks ``up`` and ``run`` for Prometheus, as ``--prometheus`` does."""
    return os.environ.get("WITH_PROMETHEUS") == "1"


def dsn(user: str, password: str, driver: str = "postgresql+asyncpg", port: int = PG_PORT) -> str:
    return f"{driver}://{user}:{password}@127.0.0.1:{port}/{PG_DB}"


def topic_settings() -> TopicSettings:
    """How the stack makes its topics (``sagakit.kafka_topics``): the ``KAFKA_*`` topic
    settings, their defaults following the brokers it runs: on three or more, a replication
    factor of 3 and a minimum of 2 in sync; on one, 1 and 1."""
    replicas = min(3, KAFKA_BROKERS)
    return TopicSettings.model_validate({
        "KAFKA_REPLICATION_FACTOR": os.environ.get("KAFKA_REPLICATION_FACTOR", str(replicas)),
        "KAFKA_MIN_INSYNC_REPLICAS": os.environ.get("KAFKA_MIN_INSYNC_REPLICAS",
                                                    str(min(2, max(1, replicas - 1))))})
