"""docker-compose.yml cannot run here (no Docker engine): check it against the compose
specification's schema (vendored, deploy/k8s/schemas) and that it matches the local stack's
topology, ports, topics, roles and settings, as the Kubernetes manifests do; and the image's
Dockerfile for what makes it cacheable, pinned and unprivileged."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from compose_stack import compose_file
from compose_stack.images import image_variables
from compose_stack.settings import DEFAULT_HOST_PORTS
from local_stack.settings import DEFAULT_SERVICE_PORTS
from saga_contracts.topics import ALL_TOPICS
from sagakit.kafka_topics import DEFAULT_TOPIC_PARTITIONS

ROOT = Path(__file__).resolve().parents[2]
SERVICES = tuple(DEFAULT_SERVICE_PORTS)
DOCKERFILE = ROOT / "deploy/docker/service.Dockerfile"
KAFKA_DIR = ROOT / "deploy/docker/kafka"
# The services' base image: Python's official image by registry, tag and digest (the manifest
# list of python:3.11.7-slim-bookworm, as docker-library/repo-info recorded it from Docker Hub and
# dagger/dagger's Python SDK pins it for python:3.11-slim).
PYTHON_IMAGE = ("docker.io/library/python:3.11.7-slim-bookworm"
                "@sha256:8f64a67710f3d981cf3008d6f9f1dbe61accd7927f165f4e37ea3f8b883ccc3f")


def compose() -> dict[str, Any]:
    return compose_file.load()


def test_host_ports_and_upstream_images_are_variables_with_the_usual_defaults() -> None:
    """What compose_stack (podman, offline images, other host ports) changes is variables: the
    host ports default to the local stack's, the images to the upstream ones."""
    found = compose_file.defaults()
    for name, port in DEFAULT_HOST_PORTS.items():
        assert found.get(name) == str(port), name
    assert found["POSTGRES_IMAGE"].startswith("postgres:")
    assert found["KAFKA_IMAGE"].startswith("apache/kafka:")
    assert found["PROMETHEUS_IMAGE"].startswith("prom/prometheus:")
    assert found["PYTHON_IMAGE"] == PYTHON_IMAGE
    assert set(image_variables()) <= set(found)


def kafka_properties() -> dict[str, str]:
    """deploy/docker/kafka/server.properties, which compose's Kafka starts with."""
    lines = (KAFKA_DIR / "server.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def shell_variable(script: str, name: str) -> str:
    found = re.search(rf"^{name}=\"?([^\"\n]*)\"?$", script, re.M)
    assert found, f"no {name}= in the script"
    return found.group(1)


def compose_spec_errors(doc: dict[str, Any]) -> list[str]:
    schema = json.loads((ROOT / "deploy/k8s/schemas/compose-spec.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(doc)]


def test_compose_is_valid_by_the_compose_specification() -> None:
    assert compose_spec_errors(compose()) == []


def test_the_specification_check_refuses_a_wrong_file() -> None:
    doc = compose()
    doc["services"]["pedidos"]["depends_on"]["pedidos-migrations"] = {"condition": "healthy"}
    doc["services"]["kafka"]["healthcheck"]["retry"] = 3
    errors = compose_spec_errors(doc)
    assert any("healthy" in e for e in errors), errors
    assert any("retry" in e for e in errors), errors


def test_every_published_port_is_on_the_hosts_loopback_only() -> None:
    """As the local stack: Docker publishes a bare "8001:8001" on every interface, and the
    gateway, Kafka and the identity provider must not be reachable from the network."""
    for name, spec in compose()["services"].items():
        for port in spec.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_compose_has_the_same_parts_and_ports_as_the_local_stack() -> None:
    services = compose()["services"]
    expected = {**{s: str(p) for s, p in DEFAULT_SERVICE_PORTS.items()}, "gateway": "8010",
                "kafka": "9092", "postgres": "25432", "consola": "8030"}
    for name, port in expected.items():
        assert name in services, name
        published = [str(p).rsplit(":", 1)[0] for p in services[name].get("ports", [])]
        assert f"127.0.0.1:{port}" in published, (name, published)
    for service, port in DEFAULT_SERVICE_PORTS.items():
        for part in (service, f"{service}-worker"):
            assert services[part]["environment"]["HTTP_PORT"] == str(port)
            assert services[part]["build"]["args"] == {
                "SERVICE": service, "PORT": str(port),
                "PYTHON_IMAGE": PYTHON_IMAGE}
    stack = (ROOT / "tools/local-stack/src/local_stack/settings.py").read_text()
    for var, port in [("GATEWAY_PORT", "8010"), ("KAFKA_PORT", "9092"), ("PG_PORT", "25432"),
                      ("CONSOLA_PORT", "8030")]:
        assert f'"{var}", "{port}"' in stack


def test_the_parts_that_scale_publish_no_host_port() -> None:
    """A worker may run as several containers (`--scale`): a fixed host port would stop the
    second one; the API containers keep the local stack's ports and run one each."""
    services = compose()["services"]
    for service in SERVICES:
        worker = services[f"{service}-worker"]
        assert "ports" not in worker, service
        assert worker["environment"]["RUN_CONSUMER"] == "true"
        api = services[service]["environment"]
        assert (api["RUN_CONSUMER"], api["RUN_RELAY"], api["RUN_JOBS"]) == ("false",) * 3
        assert not any(k.startswith("KAFKA_") for k in api), service


def test_compose_creates_every_topic_with_the_local_stacks_partitions() -> None:
    doc = compose()
    services = doc["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:4.")
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["kafka-init"]["entrypoint"] == ["/bin/bash", "/etc/saga-kafka/init.sh"]
    assert "./deploy/docker/kafka:/etc/saga-kafka:ro" in services["kafka-init"]["volumes"]
    script = (KAFKA_DIR / "init.sh").read_text()
    commands = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert commands[0] == "set -eu", "the init script goes on after a failure"
    assert set(shell_variable(script, "TOPICS").split()) == set(ALL_TOPICS)
    assert shell_variable(script, "PARTITIONS") == str(DEFAULT_TOPIC_PARTITIONS)
    assert '--partitions "$PARTITIONS"' in script
    assert kafka_properties()["num.partitions"] == str(DEFAULT_TOPIC_PARTITIONS)


def test_kafka_and_postgresql_keep_their_data_in_volumes() -> None:
    doc = compose()
    services = doc["services"]
    kafka_dir = kafka_properties()["log.dirs"]
    assert f"kafkadata:{kafka_dir}" in services["kafka"]["volumes"]
    # PostgreSQL 18's image keeps PGDATA in /var/lib/postgresql/18/docker and refuses a volume
    # on /var/lib/postgresql/data.
    assert "pgdata:/var/lib/postgresql" in services["postgres"]["volumes"]
    assert {"kafkadata", "pgdata"} <= set(doc["volumes"])


def test_every_long_running_part_has_a_healthcheck_that_its_dependents_wait_for() -> None:
    services = compose()["services"]
    for name, spec in services.items():
        one_shot = spec.get("restart") == "no" or name == "kafka-init"
        if not one_shot and name != "prometheus":
            assert "healthcheck" in spec, name
        for dependency, condition in spec.get("depends_on", {}).items():
            depended = services[dependency]
            expected = ("service_completed_successfully"
                        if depended.get("restart") == "no" or dependency == "kafka-init"
                        else "service_healthy")
            assert condition == {"condition": expected}, (name, dependency)
    for service in SERVICES:
        check = " ".join(services[service]["healthcheck"]["test"])
        assert "/ready" in check and "HTTP_PORT" in check
    assert services["pagos-worker"]["depends_on"]["gateway"] == {"condition": "service_healthy"}


def test_max_connections_holds_every_process_at_the_most_workers() -> None:
    doc = compose()
    services = doc["services"]
    command = " ".join(services["postgres"]["command"])
    have = int(re.search(r"max_connections=(\d+)", command).group(1))  # type: ignore[union-attr]
    pool = 20  # DB_POOL_SIZE's default (sagakit.runtime.ServiceSettings); compose keeps it
    assert all("DB_POOL_SIZE" not in s.get("environment", {}) for s in services.values())
    processes = len(SERVICES) * (1 + doc["x-max-workers"])
    migrations, reserved = len(SERVICES), 3  # superuser_reserved_connections
    registry = 10  # the schema registry's pool (deploy/docker/registry/start.py)
    assert have >= processes * (pool + 1) + migrations + reserved + registry


def test_each_service_connects_with_its_own_role_and_migrates_as_owner() -> None:
    services = compose()["services"]
    for name in SERVICES:
        for part in (name, f"{name}-worker"):
            env = services[part]["environment"]
            assert env["DATABASE_URL"].startswith(f"postgresql+asyncpg://{name}_app:${{")
            assert services[part]["build"]["args"]["SERVICE"] == name
            assert services[part]["depends_on"][f"{name}-migrations"] == {
                "condition": "service_completed_successfully"}
        migrations = services[f"{name}-migrations"]
        assert migrations["build"] == services[name]["build"]
        assert migrations["command"] == ["alembic", "-c", f"services/{name}/alembic.ini",
                                         "upgrade", "head"]
        assert migrations["environment"]["DATABASE_URL"].startswith(
            f"postgresql+asyncpg://{name}_owner:${{")
        assert migrations["restart"] == "no"
    init = (ROOT / "deploy/postgres/init.sql").read_text()
    schemas = (ROOT / "deploy/postgres/schemas.sql").read_text()
    assert "_owner" in init and "_app" in init
    assert "ALTER DEFAULT PRIVILEGES" in schemas
    for dockerfile in {s["build"]["dockerfile"] for s in services.values() if "build" in s}:
        assert (ROOT / dockerfile).exists()


def test_every_setting_given_to_a_service_is_one_it_reads() -> None:
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)` \|",
                                (ROOT / "docs/configuration.md").read_text(), re.M))
    services = compose()["services"]
    for name in (*SERVICES, *(f"{s}-worker" for s in SERVICES), "gateway",
                 "identity-provider"):
        assert set(services[name]["environment"]) - documented == set(), name


def test_no_service_container_gets_the_owners_or_the_admins_password() -> None:
    services = compose()["services"]
    for name in (*SERVICES, *(f"{s}-worker" for s in SERVICES), "gateway",
                 "identity-provider"):
        env = services[name]["environment"]
        said = " ".join(f"{k}={v}" for k, v in env.items())
        assert "_owner:" not in said and "OWNER_PASSWORD" not in said, name
        assert "ADMIN_PASSWORD" not in said and "saga_admin" not in said, name
        assert "MIGRATION_DATABASE_URL" not in env, name
        service = name.removesuffix("-worker")
        others = [s for s in SERVICES if s != service]
        assert not any(f"{other.upper()}_" in said for other in others), name
    # The image's own command starts the service only: migrating is the one-shot container's.
    cmd = next(line for line in DOCKERFILE.read_text().splitlines() if line.startswith("CMD"))
    assert "alembic" not in cmd and "MIGRATION" not in cmd


# ${NAME:?message}: compose refuses to start while NAME is unset or empty.
REQUIRED = re.compile(r"\$\{(\w+):\?[^}]*\}")
# ${NAME:-}: a setting .env may leave empty (never a password).
OPTIONAL = re.compile(r"\$\{(\w+):-\}")


def test_every_password_comes_from_the_uncommitted_env_file() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    services = compose()["services"]
    secret_like = {f"{where}.{k}": str(v) for where, s in services.items()
                   for k, v in (s.get("environment") or {}).items()
                   if "PASSWORD" in k or ("_URL" in k and "postgres" in str(v) and "@" in str(v))}
    # The schema registry's JDBC URL names no one: its role and password are variables apart.
    assert "@" not in services["schema-registry"]["environment"]["REGISTRY_DATASOURCE_URL"]
    for key, value in secret_like.items():
        assert REQUIRED.search(value), f"{key} does not come from .env: {value}"
    required = set(REQUIRED.findall(text))
    optional = set(OPTIONAL.findall(text))
    assert not any("PASSWORD" in name or "SECRET" in name for name in optional), optional
    # Settings with a default of their own (host ports, images, the version): never a secret,
    # and each named in .env.example's comments, with its default.
    defaulted = set(compose_file.defaults())
    assert not any("PASSWORD" in name or "SECRET" in name or "KEY" in name
                   for name in defaulted), defaulted
    assert set(re.findall(r"\$\{(\w+)", text)) == required | optional | defaulted, (
        "another ${...} form")
    example = (ROOT / ".env.example").read_text()
    for name, default in compose_file.defaults().items():
        assert f"# {name}={default}" in example, f"{name} is not in .env.example's comments"
    assigned = {name: value for name, _, value in (
        line.partition("=") for line in example.splitlines() if line and not line.startswith("#"))}
    assert required | optional == set(assigned), (
        "docker-compose.yml and .env.example name other variables")
    assert all(value == "" for value in assigned.values()), ".env.example holds a value"
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT)
    assert ignored.returncode == 0, ".env is not git-ignored"
    assert subprocess.run(["git", "check-ignore", "-q", ".env.example"],
                          cwd=ROOT).returncode == 1


def test_init_sql_takes_the_passwords_from_the_environment_and_closes_the_database() -> None:
    init = (ROOT / "deploy/postgres/init.sql").read_text()
    schemas = (ROOT / "deploy/postgres/schemas.sql").read_text()
    postgres_env = compose()["services"]["postgres"]["environment"]
    for service in SERVICES:
        for kind in ("owner", "app"):
            variable = f"{service.upper()}_{kind.upper()}_PASSWORD"
            assert re.search(rf"^\\getenv {service}_{kind}_password {variable}$", init, re.M)
            assert f"('{service}_{kind}', :'{service}_{kind}_password')" in init
            assert REQUIRED.fullmatch(postgres_env[variable])
        assert f"'{service}'" in schemas
    for sql in (init, schemas):
        assert not re.search(r"PASSWORD\s+'", sql, re.I), "a password literal"
    assert "REVOKE ALL ON DATABASE %I FROM PUBLIC" in schemas
    assert "REVOKE ALL ON SCHEMA public FROM PUBLIC" in schemas
    # The Kubernetes cluster runs schemas.sql without psql: no psql command in it.
    assert not re.search(r"^\s*\\", schemas, re.M)
    # Mounted where the image's entrypoint runs them, in this order (with psql, in the
    # container's environment).
    assert compose()["services"]["postgres"]["volumes"][:2] == [
        "./deploy/postgres/init.sql:/docker-entrypoint-initdb.d/10-roles.sql:ro",
        "./deploy/postgres/schemas.sql:/docker-entrypoint-initdb.d/20-schemas.sql:ro"]


def test_only_pedidos_and_pagos_get_the_payment_token_keys_and_from_outside_the_file() -> None:
    """pedidos seals with the public key, pagos opens with the private one, inventario only
    passes the sealed token on; no key is written in the committed file."""
    services = compose()["services"]
    assert services["pedidos"]["environment"]["PEDIDOS_PAYMENT_TOKEN_SEAL_KEY"].startswith(
        "${PEDIDOS_PAYMENT_TOKEN_SEAL_KEY:?")
    assert services["pagos-worker"]["environment"]["PAGOS_PAYMENT_TOKEN_OPEN_KEYS"].startswith(
        "${PAGOS_PAYMENT_TOKEN_OPEN_KEYS:?")
    # pagos' API opens no token (pagos.app.create): only its worker holds the keys.
    expected = {"pedidos": {"PEDIDOS_PAYMENT_TOKEN_SEAL_KEY"},
                "pedidos-worker": {"PEDIDOS_PAYMENT_TOKEN_SEAL_KEY"},
                "inventario": set(), "inventario-worker": set(),
                "pagos": set(), "pagos-worker": {"PAGOS_PAYMENT_TOKEN_OPEN_KEYS"}}
    for part, keys in expected.items():
        assert {k for k in services[part]["environment"] if "PAYMENT_TOKEN" in k} == keys, part


def _dockerfile_lines() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_image_caches_its_dependencies_and_installs_them_as_locked() -> None:
    lines = _dockerfile_lines()
    syncs = [i for i, line in enumerate(lines) if "uv sync" in line]
    sources = [i for i, line in enumerate(lines) if re.match(r"COPY (libs|services|tools)", line)]
    assert len(syncs) == 2 and sources
    assert "--no-install-workspace" in lines[syncs[0]] and syncs[0] < min(sources)
    assert all("--locked" in lines[i] and "--no-dev" in lines[i] for i in syncs)
    assert all("--package sagactl" in lines[i] for i in syncs), "sagactl is not in the image"
    # What the dependency layer is built from: the lock and every pyproject.toml, found
    # rather than listed, so that a new workspace member cannot be forgotten.
    assert any("find . -name pyproject.toml" in line and "uv.lock" in line for line in lines)
    assert subprocess.run(["uv", "lock", "--check", "--offline"], cwd=ROOT,
                          capture_output=True).returncode == 0, "uv.lock is not the workspace's"


def test_the_image_pins_uv_and_its_base_and_runs_unprivileged() -> None:
    lines = _dockerfile_lines()
    pins = (ROOT / "deploy/docker/uv-requirements.txt").read_text()
    assert re.search(r"^uv==\d+\.\d+\.\d+ ", pins, re.M)
    assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}", pins)) >= 1
    assert any("--require-hashes -r /tmp/uv-requirements.txt" in line for line in lines)
    base = next(line for line in lines if line.startswith("ARG PYTHON_IMAGE="))
    assert base == f"ARG PYTHON_IMAGE={PYTHON_IMAGE}"
    assert pinned_by_digest(base.partition("=")[2])
    users = [line for line in lines if line.startswith("USER ")]
    assert users and users[-1] != "USER root" and not users[-1].startswith("USER 0")
    assert "EXPOSE ${PORT}" in lines and any(line.startswith("HEALTHCHECK") for line in lines)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".local", ".env"} <= set(ignored)


@pytest.mark.external
def test_the_images_uv_steps_install_a_service_from_what_the_dockerfile_copies(
        tmp_path: Path) -> None:
    """The Dockerfile's two `uv sync` commands, run as its stages run them: first with the lock
    and the pyproject.toml files alone (the dependency layer), then with the sources. Needs
    PyPI or uv's cache (make bootstrap fills it)."""
    lines = _dockerfile_lines()
    commands = [line[line.index("uv sync"):].replace("${SERVICE}", "pedidos")
                for line in lines if "uv sync" in line]
    app = tmp_path / "app"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    for path in tracked:
        if path == "uv.lock" or path.endswith("pyproject.toml"):
            (app / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / path, app / path)
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(tmp_path / "venv"),
           "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    first = subprocess.run(commands[0].split(), cwd=app, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    for source in ("libs", "services", "tools/sagactl"):
        shutil.copytree(ROOT / source, app / source, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "tests", ".venv"))
    second = subprocess.run(commands[1].split(), cwd=app, env=env, capture_output=True,
                            text=True)
    assert second.returncode == 0, second.stderr
    python = tmp_path / "venv" / "bin" / "python"
    imported = subprocess.run([str(python), "-c", "import pedidos.app, sagactl.cli, alembic"],
                              cwd=tmp_path, capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr


def test_only_pagos_worker_holds_the_opening_keys_and_the_gateway_key() -> None:
    """pagos' API serves GET /payments to the internet: a file read there must open no token
    and charge nothing. The worker, which runs the gateway worker, is the one that holds them."""
    services = compose()["services"]
    secrets = ("PAGOS_GATEWAY_SECRET_KEY", "PAGOS_PAYMENT_TOKEN_OPEN_KEYS")
    worker = services["pagos-worker"]["environment"]
    assert worker["RUN_JOBS"] == "true"
    assert all(worker.get(name) for name in secrets)
    for name, service in services.items():
        if name == "pagos-worker":
            continue
        environment = service.get("environment") or {}
        held = [v for v in environment if str(v).startswith(secrets)]
        assert held == [], f"{name} holds {held}"


def test_the_projects_images_are_built_never_pulled_and_name_their_registry() -> None:
    """A service with `build:` has `pull_policy: build` (else compose pulls `image:` first), and
    its image is named under localhost/: a name without a registry is Docker Hub's, where
    saga/* belongs to somebody else."""
    built = {name: spec for name, spec in compose()["services"].items() if "build" in spec}
    assert built
    for name, spec in built.items():
        assert spec.get("pull_policy") == "build", name
        assert spec["image"].startswith("localhost/saga/"), (name, spec["image"])


# Third-party images whose digest could not be confirmed yet (docs/deploy.md, "Images").
NOT_PINNED_BY_DIGEST: set[str] = set()


def pinned_by_digest(image: str) -> bool:
    """``name:tag@sha256:<64 hex>``: the tag for the reader, the digest for the engine."""
    return re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", image) is not None


def unpinned_images(defaults: dict[str, str]) -> list[str]:
    return sorted(name for name, default in defaults.items()
                  if name.endswith("_IMAGE") and name not in NOT_PINNED_BY_DIGEST
                  and not pinned_by_digest(default))


def test_third_party_images_are_pinned_by_digest() -> None:
    """A tag can be moved under the file: the upstream images' defaults name a digest, the
    Python base's among them (every service's image is built on it)."""
    defaults = compose_file.defaults()
    assert {"PYTHON_IMAGE", "KAFKA_IMAGE", "PROMETHEUS_IMAGE", "POSTGRES_IMAGE"} <= set(defaults)
    assert set(defaults) >= NOT_PINNED_BY_DIGEST
    assert unpinned_images(defaults) == []


def test_the_digest_check_sees_an_image_pinned_by_tag_alone() -> None:
    defaults = compose_file.defaults()
    dropped = {**defaults, "PYTHON_IMAGE": defaults["PYTHON_IMAGE"].partition("@")[0]}
    assert unpinned_images(dropped) == ["PYTHON_IMAGE"]
    assert not pinned_by_digest("python:3.11.7-slim-bookworm@sha256:abc123")


def test_every_build_of_the_projects_images_is_on_the_pinned_python_base() -> None:
    """The Dockerfile's default (a plain `docker build`) and every build of the compose file
    name the same base, by digest."""
    for build in compose_file.image_builds():
        assert dict(build.args)["PYTHON_IMAGE"] == PYTHON_IMAGE, build.image


REGISTRY_START = ROOT / "deploy/docker/registry/start.py"
# What differs between the local stack's registry and the container's, by design: where they
# listen (the loopback; every interface of the container), where the database and the scratch
# folder are, and group deletion (the local stack's tests make and delete throwaway groups).
REGISTRY_LOCAL_ONLY = {"quarkus.http.host", "quarkus.management.host",
                       "apicurio.datasource.url", "apicurio.datasource.password",
                       "apicurio.storage.snapshot.location", "apicurio.import.work-dir",
                       "apicurio.rest.deletion.group.enabled"}


def test_the_registry_container_runs_with_the_local_stacks_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from local_stack.registry import server

    for name, value in {"REGISTRY_DATASOURCE_URL": "jdbc:postgresql://postgres:5432/saga",
                        "REGISTRY_DATASOURCE_USERNAME": "registry_owner",
                        "REGISTRY_DATASOURCE_PASSWORD": "db-pw",
                        "REGISTRY_DEPLOYER_PASSWORD": "deployer-pw",
                        "REGISTRY_READER_PASSWORD": "reader-pw"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(server, "database_password", lambda: "db-pw")
    spec = importlib.util.spec_from_file_location("registry_start", REGISTRY_START)
    assert spec and spec.loader
    start = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(start)
    container, local = start.properties(), server.properties()
    assert set(local) - set(container) == {"apicurio.rest.deletion.group.enabled"}
    assert {k: v for k, v in container.items() if k not in REGISTRY_LOCAL_ONLY} == {
        k: v for k, v in local.items() if k not in REGISTRY_LOCAL_ONLY}
    assert container["apicurio.datasource.url"] == (
        "jdbc:postgresql://postgres:5432/saga?currentSchema=registry")
    assert "apicurio.rest.deletion.group.enabled" not in container, "a group is never deleted"


def test_the_schemas_are_registered_before_any_service_starts() -> None:
    services = compose()["services"]
    registration = services["schema-registration"]
    assert registration["command"] == ["sagactl", "schemas", "register"]
    assert registration["restart"] == "no"
    assert registration["depends_on"] == {"schema-registry": {"condition": "service_healthy"}}
    assert registration["environment"]["SAGACTL_REGISTRY_USERNAME"] == "deployer"
    for service in SERVICES:
        for part in (service, f"{service}-worker"):
            assert services[part]["depends_on"]["schema-registration"] == {
                "condition": "service_completed_successfully"}, part
    registry = services["schema-registry"]
    assert registry["ports"] == ["127.0.0.1:8081:8081"]
    assert registry["build"]["dockerfile"] == "deploy/docker/registry.Dockerfile"
    # Its database role and schema, made where the services' are.
    assert "'registry_owner'" in (ROOT / "deploy/postgres/init.sql").read_text()
    assert "CREATE SCHEMA IF NOT EXISTS registry AUTHORIZATION registry_owner" in (
        ROOT / "deploy/postgres/schemas.sql").read_text()
