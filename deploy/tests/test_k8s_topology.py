"""The Kubernetes deployment is the local stack's topology: the same ports, topics, database roles,
Kafka ACLs, settings, alerts and dashboard, taken from one place each, so that the local stack,
docker-compose.yml and deploy/k8s cannot drift apart."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from local_stack import kafka_auth
from local_stack.settings import (
    DEFAULT_CONSOLA_PORT,
    DEFAULT_SERVICE_PORTS,
    REGISTRY_MANAGEMENT_PORT,
    REGISTRY_PORT,
    metrics_port,
)
from saga_contracts.topics import ALL_TOPICS
from saga_harness import scripts
from sagakit.kafka_topics import DEFAULT_TOPIC_PARTITIONS

ROOT = Path(__file__).resolve().parents[2]
generate = scripts.load("deploy/k8s/generate.py", "k8s_generate")
SERVICES = tuple(DEFAULT_SERVICE_PORTS)
# Not settings of the services: the parts of DATABASE_URL and CONSOLA_DATABASE_URL Kubernetes
# fills in from a Secret (the password) or, for a managed PostgreSQL, a ConfigMap (where it is).
K8S_ONLY = {f"{prefix}_{part}" for prefix in ("DATABASE", "CONSOLA_DATABASE", "REGISTRY_DATASOURCE")
            for part in ("PASSWORD", "HOST", "PORT")}


def _of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def documented_variables() -> set[str]:
    """Every variable docs/configuration.md (generated from the settings) names."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    return set(re.findall(r"^\| `([A-Z0-9_]+)` \|", text, re.M))


def test_the_generated_files_are_up_to_date() -> None:
    assert generate.stale() == [], f"run: uv run {generate.COMMAND}"


@pytest.mark.external
def test_services_listen_on_the_local_stacks_ports(default_overlay: list[dict[str, Any]]) -> None:
    ports_of = {**DEFAULT_SERVICE_PORTS, "consola": DEFAULT_CONSOLA_PORT}
    registry = [REGISTRY_PORT, REGISTRY_MANAGEMENT_PORT]
    for deployment in _of(default_overlay, "Deployment"):
        service = deployment["metadata"]["labels"]["app.kubernetes.io/name"]
        if service == "schema-registry":
            assert [p["containerPort"] for p in
                    deployment["spec"]["template"]["spec"]["containers"][0]["ports"]] == registry
            continue
        ports = [p["containerPort"] for c in deployment["spec"]["template"]["spec"]["containers"]
                 for p in c["ports"]]
        config = next(o for o in _of(default_overlay, "ConfigMap")
                      if o["metadata"]["name"] == f"{service}-settings")
        setting = "CONSOLA_PORT" if service == "consola" else "HTTP_PORT"
        assert ports[0] == ports_of[service] == int(config["data"][setting])
        # A service's metrics-only port, the local stack's too (local_stack.settings).
        if service != "consola":
            assert ports[1:] == [metrics_port(service, ports=ports_of)] == [
                int(config["data"]["METRICS_PORT"])]
    for svc in _of(default_overlay, "Service"):
        service = svc["metadata"]["labels"]["app.kubernetes.io/name"]
        if service == "schema-registry":
            assert [p["port"] for p in svc["spec"]["ports"]] == registry
            continue
        assert [p["port"] for p in svc["spec"]["ports"]] == [ports_of[service]] + (
            [] if service == "consola" else [metrics_port(service, ports=ports_of)])


@pytest.mark.external
def test_topics_are_the_contracts(default_overlay: list[dict[str, Any]]) -> None:
    topics = _of(default_overlay, "KafkaTopic")
    assert {t["metadata"]["name"] for t in topics} == set(ALL_TOPICS)
    assert {t["spec"]["partitions"] for t in topics} == {DEFAULT_TOPIC_PARTITIONS}


def _user_acls(objects: list[dict[str, Any]]) -> set[kafka_auth.Acl]:
    return {kafka_auth.Acl(user["metadata"]["name"], rule["resource"]["type"].upper(),
                           rule["resource"]["name"], operation.upper())
            for user in _of(objects, "KafkaUser")
            for rule in user["spec"]["authorization"]["acls"]
            if rule.get("type", "allow") == "allow" and rule["resource"]["patternType"] == "literal"
            for operation in rule["operations"]}


@pytest.mark.external
def test_each_kafka_user_is_allowed_what_the_local_stack_allows_it(
        default_overlay: list[dict[str, Any]]) -> None:
    users = _of(default_overlay, "KafkaUser")
    assert {u["metadata"]["name"] for u in users} == {*kafka_auth.SERVICES, kafka_auth.OPERATOR}
    assert all(u["spec"]["authentication"]["type"] == "scram-sha-512" for u in users)
    assert _user_acls(default_overlay) == set(kafka_auth.acls())


def test_the_acl_comparison_sees_a_user_allowed_more() -> None:
    users = generate.kafka_users()
    users[0]["spec"]["authorization"]["acls"].append({
        "resource": {"type": "topic", "name": "payment-events", "patternType": "literal"},
        "operations": ["Write"]})
    assert _user_acls(users) != set(kafka_auth.acls())


@pytest.mark.external
def test_each_workload_logs_in_with_its_own_role(default_overlay: list[dict[str, Any]]) -> None:
    """The migration Job as the schema owner, the Deployments as the app role; and the
    database's managed roles are the local stack's."""
    for workload in [*_of(default_overlay, "Deployment"), *_of(default_overlay, "Job")]:
        service = workload["metadata"]["labels"]["app.kubernetes.io/name"]
        if service not in SERVICES:
            continue
        kind = "owner" if workload["kind"] == "Job" else "app"
        env = {e["name"]: e for c in workload["spec"]["template"]["spec"]["containers"]
               for e in c.get("env", [])}
        assert env["DATABASE_URL"]["value"].startswith(
            f"postgresql+asyncpg://{service}_{kind}:$(DATABASE_PASSWORD)@"), workload
        secret = env["DATABASE_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"]
        assert secret == f"saga-db-{service}-{kind}"
    cluster = _of(default_overlay, "Cluster")[0]
    roles = {r["name"]: r for r in cluster["spec"]["managed"]["roles"]}
    readers = {f"{c}_reader" for c in ("console", "sagactl", "grafana")}
    assert set(roles) == {f"{s}_{k}" for s in SERVICES for k in ("owner", "app")} | readers | {
        "registry_owner"}
    assert roles["registry_owner"]["passwordSecret"]["name"] == "saga-db-registry-owner"
    # The schema registry: its own role, over TLS verified against the cluster's CA.
    registry = next(o for o in _of(default_overlay, "Deployment")
                    if o["metadata"]["name"] == "schema-registry")
    env = {e["name"]: e for e in registry["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["REGISTRY_DATASOURCE_USERNAME"]["value"] == "registry_owner"
    assert env["REGISTRY_DATASOURCE_URL"]["value"] == (
        "jdbc:postgresql://saga-db-rw:5432/saga?sslmode=verify-full"
        "&sslrootcert=/etc/saga/db-ca/ca.crt")
    assert env["REGISTRY_DATASOURCE_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == \
        "saga-db-registry-owner"
    for reader in readers:
        assert sorted(roles[reader]["inRoles"]) == sorted(f"{s}_reader" for s in SERVICES)
        assert roles[reader]["passwordSecret"]["name"] == f"saga-db-{reader.replace('_', '-')}"


@pytest.mark.external
def test_every_setting_given_to_a_service_is_one_it_reads(
        every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    known = documented_variables() | K8S_ONLY
    for overlay, objects in every_overlay.items():
        given = {k for o in _of(objects, "ConfigMap") if o["metadata"]["name"].endswith(
            "-settings") for k in o["data"]}
        given |= {e["name"] for w in [*_of(objects, "Deployment"), *_of(objects, "Job")]
                  for c in w["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}
        assert given - known == set(), overlay


@pytest.mark.external
def test_the_dashboard_and_the_schemas_are_made_from_their_files(
        default_overlay: list[dict[str, Any]]) -> None:
    maps = {o["metadata"]["name"]: o["data"] for o in _of(default_overlay, "ConfigMap")}
    dashboard = maps["saga-grafana-dashboard"]["saga-dashboard.json"]
    assert dashboard == (ROOT / "deploy/grafana/saga-dashboard.json").read_text()
    json.loads(dashboard)
    assert maps["saga-db-schemas"]["schemas.sql"] == (
        ROOT / "deploy/postgres/schemas.sql").read_text()


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: deploy/local/bootstrap.sh installs Debian's prometheus"
    return found


def promtool_problems(rule_spec: dict[str, Any], tmp: Path) -> str:
    """``promtool check rules`` of a PrometheusRule's spec (a rule file's shape): its output
    when it refuses it, empty when it takes it."""
    path = tmp / "rules.yml"
    path.write_text(yaml.safe_dump(rule_spec))
    done = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True,
                          text=True)
    return "" if done.returncode == 0 else done.stdout + done.stderr


@pytest.mark.external
def test_the_prometheus_rule_is_the_alerts_files_and_promtool_takes_it(
        default_overlay: list[dict[str, Any]], tmp_path: Path) -> None:
    """The services' alerts (alerts.yml) and those on what only a cluster scrapes
    (alerts.cluster.yml), in that order."""
    rules = _of(default_overlay, "PrometheusRule")
    assert len(rules) == 1
    assert rules[0]["spec"] == {"groups": [
        group for name in ("alerts.yml", "alerts.cluster.yml")
        for group in yaml.safe_load((ROOT / "deploy/prometheus" / name).read_text())["groups"]]}
    assert promtool_problems(rules[0]["spec"], tmp_path) == ""


@pytest.mark.external
def test_promtool_refuses_a_broken_rule(tmp_path: Path) -> None:
    spec = generate.prometheus_rule()["spec"]
    spec["groups"][0]["rules"][0]["expr"] = "sum(rate(saga_duration_seconds_count[5m]"
    assert promtool_problems(spec, tmp_path)


@pytest.mark.external
def test_make_manifests_prints_the_default_overlay_alone(
        default_overlay: list[dict[str, Any]]) -> None:
    done = subprocess.run(["make", "-s", "manifests"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert [d for d in yaml.safe_load_all(done.stdout) if d] == default_overlay
