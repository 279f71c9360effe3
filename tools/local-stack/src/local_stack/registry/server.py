"""The schema registry's process: Apicurio Registry storing its artifacts in the stack's
PostgreSQL, in a schema of its own (``registry``) under a role of its own (``registry_owner``,
which owns that schema: Apicurio makes and upgrades its tables itself as it starts). Its REST
APIs listen on REGISTRY_PORT (``/apis/registry/v3``, and the Confluent-compatible
``/apis/ccompat/v7``), its health checks and metrics on REGISTRY_MANAGEMENT_PORT.

``up`` starts it before the services, which wait for it as they start (they cache the schemas
and refuse to start unless the versions they produce are registered: sagakit.schema_registry),
so that its JVM's start overlaps theirs; then ``up`` registers the schemas and waits for the
services. Its settings are a properties file of its own, 0600 (it
holds the database password), where Quarkus reads one: ``config/application.properties`` in its
working directory."""

from __future__ import annotations

import os
from pathlib import Path

from local_stack.console import log
from local_stack.passwords import role_password
from local_stack.ports import refuse_taken_port
from local_stack.postgres.tls import with_stack_tls
from local_stack.probes import http_ok
from local_stack.processes import alive, read_pid, spawn, stop_group, wait_for
from local_stack.registry import principals
from local_stack.registry.app import RUNNER, app_home, java
from local_stack.settings import (
    PG_DB,
    PG_PORT,
    REGISTRY_DIR,
    REGISTRY_MANAGEMENT_PORT,
    REGISTRY_PORT,
    REGISTRY_START_S,
)

PART = "registry"
ROLE = "registry_owner"
SCHEMA = "registry"
# Where the registry's APIs are, for its clients (sagactl, the tests, make credentials).
API_URL = f"http://127.0.0.1:{REGISTRY_PORT}/apis/registry/v3"


def api_url(port: int = REGISTRY_PORT) -> str:
    """The registry's REST API (v3), on its own port or on a route of the TCP proxy to it."""
    return f"http://127.0.0.1:{port}/apis/registry/v3"


CCOMPAT_URL = f"http://127.0.0.1:{REGISTRY_PORT}/apis/ccompat/v7"
READY_URL = f"http://127.0.0.1:{REGISTRY_MANAGEMENT_PORT}/health/ready"


def database_password() -> str:
    return role_password(SCHEMA, "owner")


def jdbc_url() -> str:
    return with_stack_tls(f"jdbc:postgresql://127.0.0.1:{PG_PORT}/{PG_DB}?currentSchema={SCHEMA}")


def properties() -> dict[str, str]:
    """Every setting the stack gives the registry, over the defaults its application ships."""
    return {
        "quarkus.http.host": "127.0.0.1",
        "quarkus.http.port": str(REGISTRY_PORT),
        "quarkus.management.host": "127.0.0.1",
        "quarkus.management.port": str(REGISTRY_MANAGEMENT_PORT),
        "apicurio.storage.kind": "sql",
        "apicurio.storage.sql.kind": "postgresql",
        "apicurio.datasource.url": jdbc_url(),
        "apicurio.datasource.username": ROLE,
        "apicurio.datasource.password": database_password(),
        # Its default pool keeps 20 connections open; the stack's PostgreSQL serves them all.
        "apicurio.datasource.jdbc.initial-size": "2",
        "apicurio.datasource.jdbc.min-size": "2",
        "apicurio.datasource.jdbc.max-size": "10",
        # Where it looks for its tables before making them.
        "apicurio.sql.db-schema": SCHEMA,
        # The contracts' schemas are JSON Schema 2020-12: the everit-based compatibility checker
        # knows drafts 4 to 7 only (it answers "could not determine version"); Apicurio's
        # Apitomy checker reads 2020-12.
        "apicurio.compat.json-schema.use-apitomy": "true",
        # The Confluent-compatible API names a subject <group>:<artifact>
        # (saga-events:OrdenSolicitada), so that it reaches the event schemas' group.
        "apicurio.ccompat.group-concat.enabled": "true",
        # A group, with its artifacts, may be deleted (by the deployer): the tests register
        # into throwaway groups and delete them. The registries of docker-compose.yml and of
        # the Kubernetes manifests keep Apicurio's default, which refuses it.
        "apicurio.rest.deletion.group.enabled": "true",
        "apicurio.storage.snapshot.location": str(REGISTRY_DIR / "tmp"),
        "apicurio.import.work-dir": str(REGISTRY_DIR / "tmp"),
        **principals.properties(),
    }


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def write_config(folder: Path = REGISTRY_DIR) -> Path:
    """``folder/config/application.properties``, 0600, written anew each start."""
    config = folder / "config" / "application.properties"
    config.parent.mkdir(parents=True, exist_ok=True)
    (folder / "tmp").mkdir(exist_ok=True)
    text = "".join(f"{k}={_escape(v)}\n" for k, v in properties().items())
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(config, 0o600)
    return config


def command(home: Path) -> list[str]:
    # C1 only, as for Kafka (local_stack.kafka.java_cmd): on two shared cores C2 spends a
    # core for minutes after the start for little gain on a registry read a few times a start.
    return [str(java()), "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.util.logging.manager=org.jboss.logmanager.LogManager",
            "-jar", str(home / RUNNER)]


def ready() -> bool:
    return http_ok(READY_URL)


def running() -> bool:
    return alive(read_pid(PART)) and ready()


def start_registry() -> None:
    """Starts the registry unless it runs and is ready; does not wait (``wait_registry``)."""
    if running():
        return
    stop_group(PART, grace_s=30)
    refuse_taken_port(REGISTRY_PORT, f"{PART} (REGISTRY_PORT)")
    refuse_taken_port(REGISTRY_MANAGEMENT_PORT, f"{PART} (REGISTRY_MANAGEMENT_PORT)")
    home = app_home()
    write_config()
    log(f"starting the schema registry (Apicurio Registry) on http://127.0.0.1:{REGISTRY_PORT}")
    # No password of the stack's environment (PostgreSQL's admin's...) reaches it; QUARKUS_*
    # and APICURIO_* variables do, over the file, to tune it.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_PASSWORD")}
    spawn(PART, command(home), env, cwd=REGISTRY_DIR)


def wait_registry() -> None:
    """Waits for the registry's readiness check (its database reached, its tables made)."""
    wait_for(READY_URL, ready, REGISTRY_START_S, PART)


def stop_registry() -> None:
    stop_group(PART, grace_s=30)
