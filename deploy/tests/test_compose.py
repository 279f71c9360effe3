"""docker-compose.yml cannot run here (no Docker engine): check its syntax and that it matches
the local stack's topology, ports, topics and roles."""

from __future__ import annotations

import re
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


def test_each_service_connects_with_its_own_role_and_migrates_as_owner() -> None:
    services = compose()["services"]
    for name in ("pedidos", "inventario", "pagos"):
        env = services[name]["environment"]
        assert f"//{name}_app:" in env["DATABASE_URL"]
        assert f"//{name}_owner:" in env["MIGRATION_DATABASE_URL"]
        assert services[name]["build"]["args"]["SERVICE"] == name
    init = (ROOT / "deploy/postgres/init.sql").read_text()
    assert "ALTER DEFAULT PRIVILEGES" in init and "_owner" in init and "_app" in init
    for dockerfile in {s["build"]["dockerfile"] for s in services.values() if "build" in s}:
        assert (ROOT / dockerfile).exists()


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
