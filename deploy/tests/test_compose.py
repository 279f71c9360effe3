"""docker-compose.yml cannot run here (no Docker engine): check its syntax and that it matches
the local stack's topology, ports, topics and roles."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from saga_contracts.topics import ALL_TOPICS

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_the_same_parts_and_ports_as_the_local_stack() -> None:
    services = compose()["services"]
    expected = {"pedidos": "8001", "inventario": "8002", "pagos": "8003", "gateway": "8010",
                "kafka": "9092", "postgres": "25432"}
    for name, port in expected.items():
        assert name in services, name
        published = [str(p).split(":")[0] for p in services[name].get("ports", [])]
        assert port in published, (name, published)
    stack = (ROOT / "tools/local-stack/src/local_stack/settings.py").read_text()
    for var, port in [("PEDIDOS_PORT", "8001"), ("INVENTARIO_PORT", "8002"),
                      ("PAGOS_PORT", "8003"), ("GATEWAY_PORT", "8010"), ("KAFKA_PORT", "9092"),
                      ("PG_PORT", "25432")]:
        assert f'"{var}", "{port}"' in stack


def test_compose_creates_every_topic_and_uses_official_images() -> None:
    doc = compose()
    services = doc["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:4.")
    assert services["postgres"]["image"].startswith("postgres:")
    script = "\n".join(services["kafka-init"]["command"])
    created = set(re.search(r"for t in ([^;]+);", script).group(1).split())  # type: ignore[union-attr]
    assert created == set(ALL_TOPICS)


SERVICES = ("pedidos", "inventario", "pagos")
# ${NAME:?message}: compose refuses to start while NAME is unset or empty.
REQUIRED = re.compile(r"\$\{(\w+):\?[^}]*\}")


def test_each_service_connects_with_its_own_role_and_migrates_as_owner() -> None:
    services = compose()["services"]
    for name in SERVICES:
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith(f"postgresql+asyncpg://{name}_app:${{")
        assert services[name]["build"]["args"]["SERVICE"] == name
        migrations = services[f"{name}-migrations"]
        assert migrations["build"] == services[name]["build"]
        assert migrations["command"] == ["alembic", "-c", f"services/{name}/alembic.ini",
                                         "upgrade", "head"]
        assert migrations["environment"]["DATABASE_URL"].startswith(
            f"postgresql+asyncpg://{name}_owner:${{")
        assert migrations["restart"] == "no"
        assert services[name]["depends_on"][f"{name}-migrations"] == {
            "condition": "service_completed_successfully"}
    init = (ROOT / "deploy/postgres/init.sql").read_text()
    assert "ALTER DEFAULT PRIVILEGES" in init and "_owner" in init and "_app" in init
    for dockerfile in {s["build"]["dockerfile"] for s in services.values() if "build" in s}:
        assert (ROOT / dockerfile).exists()


def test_no_service_container_gets_the_owners_or_the_admins_password() -> None:
    services = compose()["services"]
    for name in (*SERVICES, "gateway"):
        env = services[name]["environment"]
        said = " ".join(f"{k}={v}" for k, v in env.items())
        assert "_owner:" not in said and "OWNER_PASSWORD" not in said, name
        assert "ADMIN_PASSWORD" not in said and "saga_admin" not in said, name
        assert "MIGRATION_DATABASE_URL" not in env, name
        others = [s for s in SERVICES if s != name]
        assert not any(f"{other.upper()}_" in said for other in others), name
    # The image's own command starts the service only: migrating is the one-shot container's.
    dockerfile = (ROOT / "deploy/docker/service.Dockerfile").read_text()
    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD"))
    assert "alembic" not in cmd and "MIGRATION" not in cmd


def test_every_password_comes_from_the_uncommitted_env_file() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    services = compose()["services"]
    secret_like = {f"{where}.{k}": str(v) for where, s in services.items()
                   for k, v in (s.get("environment") or {}).items()
                   if "PASSWORD" in k or ("_URL" in k and "postgres" in str(v))}
    for key, value in secret_like.items():
        assert REQUIRED.search(value), f"{key} does not come from .env: {value}"
    required = set(REQUIRED.findall(text))
    example = (ROOT / ".env.example").read_text()
    assigned = {name: value for name, _, value in (
        line.partition("=") for line in example.splitlines() if line and not line.startswith("#"))}
    assert required == set(assigned), "docker-compose.yml and .env.example name other variables"
    assert all(value == "" for value in assigned.values()), ".env.example holds a value"
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT)
    assert ignored.returncode == 0, ".env is not git-ignored"
    assert subprocess.run(["git", "check-ignore", "-q", ".env.example"],
                          cwd=ROOT).returncode == 1


def test_init_sql_takes_the_passwords_from_the_environment_and_closes_the_database() -> None:
    init = (ROOT / "deploy/postgres/init.sql").read_text()
    postgres_env = compose()["services"]["postgres"]["environment"]
    for service in SERVICES:
        for kind in ("owner", "app"):
            variable = f"{service.upper()}_{kind.upper()}_PASSWORD"
            assert re.search(rf"^\\getenv {service}_{kind}_password {variable}$", init, re.M)
            assert f"('{service}_{kind}', :'{service}_{kind}_password')" in init
            assert REQUIRED.fullmatch(postgres_env[variable])
    assert not re.search(r"PASSWORD\s+'", init, re.I), "a password literal in init.sql"
    assert "REVOKE ALL ON DATABASE %I FROM PUBLIC" in init
    assert "REVOKE ALL ON SCHEMA public FROM PUBLIC" in init
    # Mounted where the image's entrypoint runs it (with psql, in the container's environment).
    assert "./deploy/postgres/init.sql:/docker-entrypoint-initdb.d/10-roles.sql:ro" in \
        compose()["services"]["postgres"]["volumes"]


def test_only_pedidos_and_pagos_get_the_payment_token_keys_and_from_outside_the_file() -> None:
    """pedidos seals with the public key, pagos opens with the private one, inventario only
    passes the sealed token on; no key is written in the committed file."""
    services = compose()["services"]
    assert services["pedidos"]["environment"]["PEDIDOS_PAYMENT_TOKEN_SEAL_KEY"].startswith(
        "${PEDIDOS_PAYMENT_TOKEN_SEAL_KEY:?")
    assert services["pagos"]["environment"]["PAGOS_PAYMENT_TOKEN_OPEN_KEYS"].startswith(
        "${PAGOS_PAYMENT_TOKEN_OPEN_KEYS:?")
    for name in ("pedidos", "inventario", "pagos"):
        keys = {k for k in services[name]["environment"] if "PAYMENT_TOKEN" in k}
        assert keys == {"pedidos": {"PEDIDOS_PAYMENT_TOKEN_SEAL_KEY"}, "inventario": set(),
                        "pagos": {"PAGOS_PAYMENT_TOKEN_OPEN_KEYS"}}[name]
