"""Starts the schema registry container: Apicurio Registry with the settings the local stack
gives its own (local_stack.registry.server and .principals; deploy/tests/test_compose.py holds
them together), written to ``config/application.properties`` in the working directory (where
Quarkus reads it; 0600, it holds the database password), then ``java`` in this process' place.

From the environment, all required:
- REGISTRY_DATASOURCE_URL: the JDBC URL of its PostgreSQL (``jdbc:postgresql://…/saga``;
  ``?currentSchema=registry`` is added), REGISTRY_DATASOURCE_USERNAME (the schema's owner,
  ``registry_owner``: Apicurio makes and upgrades its tables itself) and
  REGISTRY_DATASOURCE_PASSWORD;
- REGISTRY_DEPLOYER_PASSWORD and REGISTRY_READER_PASSWORD: the principals ``deployer`` (writes
  the schemas) and ``reader`` (reads them); the file holds only their digests.
The API listens on 8081, the health checks and metrics on 9081.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

# Where deploy/docker/registry.Dockerfile puts the application and the Java runtime.
HOME = Path("/opt/apicurio")
JAVA = Path("/opt/java/bin/java")
API_PORT, MANAGEMENT_PORT = 8081, 9081
SCHEMA = "registry"
# Apicurio's roles (its defaults for apicurio.auth.roles.developer and .readonly).
PRINCIPALS = {"deployer": "sr-developer", "reader": "sr-readonly"}
# Quarkus' embedded users realm: a password is stored as HEX(MD5(user ":" realm ":" password)).
REALM = "Quarkus"
# C1 only and a serial collector, as the local stack runs it: a registry read a few times a
# deployment needs no optimising compiler spending a core after its start.
JAVA_OPTIONS = ["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.util.logging.manager=org.jboss.logmanager.LogManager"]


def required(value: str | None, name: str) -> str:
    if not value:
        sys.exit(f"schema registry: {name} is not set")
    return value


def digest(name: str, password: str) -> str:
    return hashlib.md5(f"{name}:{REALM}:{password}".encode(), usedforsecurity=False).hexdigest()


def properties() -> dict[str, str]:
    url = required(os.environ.get("REGISTRY_DATASOURCE_URL"), "REGISTRY_DATASOURCE_URL")
    passwords = {
        "deployer": required(os.environ.get("REGISTRY_DEPLOYER_PASSWORD"),
                             "REGISTRY_DEPLOYER_PASSWORD"),
        "reader": required(os.environ.get("REGISTRY_READER_PASSWORD"),
                           "REGISTRY_READER_PASSWORD"),
    }
    found = {
        "quarkus.http.host": "0.0.0.0",
        "quarkus.http.port": str(API_PORT),
        "quarkus.management.host": "0.0.0.0",
        "quarkus.management.port": str(MANAGEMENT_PORT),
        "apicurio.storage.kind": "sql",
        "apicurio.storage.sql.kind": "postgresql",
        "apicurio.datasource.url": url + ("&" if "?" in url else "?") + f"currentSchema={SCHEMA}",
        "apicurio.datasource.username": required(
            os.environ.get("REGISTRY_DATASOURCE_USERNAME"), "REGISTRY_DATASOURCE_USERNAME"),
        "apicurio.datasource.password": required(
            os.environ.get("REGISTRY_DATASOURCE_PASSWORD"), "REGISTRY_DATASOURCE_PASSWORD"),
        "apicurio.datasource.jdbc.initial-size": "2",
        "apicurio.datasource.jdbc.min-size": "2",
        "apicurio.datasource.jdbc.max-size": "10",
        "apicurio.sql.db-schema": SCHEMA,
        # The contracts' schemas are JSON Schema 2020-12, which only the Apitomy checker reads.
        "apicurio.compat.json-schema.use-apitomy": "true",
        # The Confluent-compatible API names a subject <group>:<artifact>.
        "apicurio.ccompat.group-concat.enabled": "true",
        "apicurio.storage.snapshot.location": "/tmp",
        "apicurio.import.work-dir": "/tmp",
        "quarkus.oidc.tenant-enabled": "false",
        "quarkus.http.auth.basic": "true",
        "apicurio.auth.role-based-authorization": "true",
        "apicurio.auth.role-source": "token",
        "apicurio.auth.anonymous-read-access.enabled": "false",
        "quarkus.security.users.embedded.plain-text": "false",
        "quarkus.security.users.embedded.algorithm": "digest-md5",
    }
    for name, role in PRINCIPALS.items():
        found[f"quarkus.security.users.embedded.users.{name}"] = digest(name, passwords[name])
        found[f"quarkus.security.users.embedded.roles.{name}"] = role
    return found


def write_config(folder: Path) -> Path:
    config = folder / "config" / "application.properties"
    config.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in properties().items())
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return config


def main() -> None:
    write_config(Path.cwd())
    # The passwords stay in the file alone: none reaches the JVM's environment.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_PASSWORD")}
    command = [str(JAVA), *JAVA_OPTIONS, "-jar", str(HOME / "quarkus-run.jar")]
    os.execve(command[0], command, env)


if __name__ == "__main__":
    main()
