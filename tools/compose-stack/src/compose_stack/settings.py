"""Where the compose stack keeps its state, and the names and ports it uses."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

# The checkout: the workspace installs this package from its source (tools/compose-stack/src).
ROOT = Path(__file__).resolve().parents[4]
COMPOSE_FILE = ROOT / "docker-compose.yml"
# The compose project's name (docker-compose.yml's `name:`): its containers, volumes and network
# are called saga-choreography_<...>.
PROJECT = "saga-choreography"
PODMAN_FILES = ROOT / "deploy" / "podman"

STATE = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local")).resolve() / "podman"
# Podman's run-time files (conmon's sockets, the network's DNS) want a short path on a tmpfs:
# a socket's path may not exceed 108 bytes. One directory per checkout, named after its path.
RUN = Path("/run") / f"saga-choreography-{hashlib.sha1(str(STATE).encode()).hexdigest()[:10]}"

# The offline images (compose_stack.images), named under localhost/ so that no registry is
# ever asked for them.
OFFLINE = "localhost/saga-offline"
BASE_IMAGE = f"{OFFLINE}/debian:bookworm"
DEBIAN_MIRROR = os.environ.get("SAGA_DEBIAN_MIRROR", "http://deb.debian.org/debian")

# The host ports docker-compose.yml publishes (on 127.0.0.1), each a variable of the file with
# the local stack's port as its default.
DEFAULT_HOST_PORTS = {
    "PEDIDOS_HOST_PORT": 8001,
    "INVENTARIO_HOST_PORT": 8002,
    "PAGOS_HOST_PORT": 8003,
    "GATEWAY_HOST_PORT": 8010,
    "IDENTITY_HOST_PORT": 8020,
    "CONSOLA_HOST_PORT": 8030,
    "POSTGRES_HOST_PORT": 25432,
    "KAFKA_HOST_PORT": 9092,
    "PROMETHEUS_HOST_PORT": 9090,
    "REGISTRY_HOST_PORT": 8081,
}
# The host ports set in the environment (None when not): they win over the env file's, which
# win over the defaults (compose_stack.cli.host_ports), as with docker compose.
ENVIRONMENT_HOST_PORTS = {
    "PEDIDOS_HOST_PORT": os.environ.get("PEDIDOS_HOST_PORT"),
    "INVENTARIO_HOST_PORT": os.environ.get("INVENTARIO_HOST_PORT"),
    "PAGOS_HOST_PORT": os.environ.get("PAGOS_HOST_PORT"),
    "GATEWAY_HOST_PORT": os.environ.get("GATEWAY_HOST_PORT"),
    "IDENTITY_HOST_PORT": os.environ.get("IDENTITY_HOST_PORT"),
    "CONSOLA_HOST_PORT": os.environ.get("CONSOLA_HOST_PORT"),
    "POSTGRES_HOST_PORT": os.environ.get("POSTGRES_HOST_PORT"),
    "REGISTRY_HOST_PORT": os.environ.get("REGISTRY_HOST_PORT"),
    "KAFKA_HOST_PORT": os.environ.get("KAFKA_HOST_PORT"),
    "PROMETHEUS_HOST_PORT": os.environ.get("PROMETHEUS_HOST_PORT"),
}
# The file of passwords and keys (and any other variable) podman-compose reads.
ENV_FILE = Path(os.environ.get("SAGA_COMPOSE_ENV_FILE") or ROOT / ".env")
# Where the podman shim writes the waits it failed (a step that failed, a container that never
# started), for `up` to end at once rather than wait with podman-compose for ever.
FAILED_WAITS = STATE / "failed-waits"
