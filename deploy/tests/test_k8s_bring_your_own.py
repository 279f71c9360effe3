"""Kafka and PostgreSQL are what a user brings: the base names neither Strimzi nor CloudNativePG
nor where they run; components/strimzi-kafka and components/cloudnative-pg bring them into the
default and kind overlays; overlays/managed reaches a managed Kafka and a managed PostgreSQL,
every client over TLS that verifies the server's certificate (and, for PostgreSQL, its name)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from local_stack.settings import DEFAULT_SERVICE_PORTS
from saga_contracts import topics

Objects = list[dict[str, Any]]
OPERATOR_GROUPS = ("kafka.strimzi.io", "postgresql.cnpg.io")
# What only an operator's objects are called or labelled by.
OPERATOR_NAMES = ("saga-kafka-kafka-bootstrap", "saga-kafka-cluster-ca-cert", "saga-db-rw",
                  "strimzi.io/", "cnpg.io/")
DATABASE_URLS = ("DATABASE_URL", "CONSOLA_DATABASE_URL")


def _of(objects: Objects, kind: str) -> Objects:
    return [o for o in objects if o["kind"] == kind]


def _operator_objects(objects: Objects) -> list[str]:
    return [f"{o['kind']} {o['metadata']['name']}" for o in objects
            if o["apiVersion"].split("/")[0] in OPERATOR_GROUPS
            or (o["kind"] == "PodMonitor" and o["metadata"]["name"] in ("saga-kafka", "saga-db"))
            or (o["kind"] == "ConfigMap" and o["metadata"]["name"] == "saga-db-schemas")]


def _containers(objects: Objects) -> list[tuple[dict[str, Any], dict[str, Any],
                                               dict[str, Any]]]:
    """(workload, pod spec, container) for every container, init containers too."""
    out = []
    for workload in [*_of(objects, "Deployment"), *_of(objects, "Job")]:
        pod = workload["spec"]["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            out.append((workload, pod, container))
    return out


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def _mounted_from(pod: dict[str, Any], container: dict[str, Any], path: str) -> dict[str, Any]:
    """The volume the file at ``path`` of ``container`` comes from."""
    for mount in container.get("volumeMounts", []):
        if path.startswith(mount["mountPath"].rstrip("/") + "/"):
            return next(v for v in pod["volumes"] if v["name"] == mount["name"])
    raise AssertionError(f"{container['name']}: nothing is mounted at {path}")


@pytest.mark.external
def test_the_base_brings_no_kafka_or_postgresql(base_alone: Objects) -> None:
    assert _operator_objects(base_alone) == []
    text = json.dumps(base_alone)
    assert [name for name in OPERATOR_NAMES if name in text] == []


@pytest.mark.external
@pytest.mark.parametrize("overlay", ["default", "kind", "keda"])
def test_the_in_cluster_overlays_bring_both_operators(
        every_overlay: dict[str, Objects], overlay: str) -> None:
    objects = every_overlay[overlay]
    found = set(_operator_objects(objects))
    expected = {"Kafka saga-kafka", "KafkaNodePool dual-role", "Cluster saga-db",
                "ImageCatalog saga-postgresql", "PodMonitor saga-kafka", "PodMonitor saga-db",
                "ConfigMap saga-db-schemas",
                *(f"KafkaTopic {t}" for t in topics.ALL_TOPICS),
                *(f"KafkaUser {u}" for u in (*DEFAULT_SERVICE_PORTS, "operator"))}
    assert expected <= found
    # Every container that connects reaches CloudNativePG's primary, every policy of a part
    # that connects lets it out to the instances; the workers and the console reach Strimzi's
    # brokers with its CA.
    policies = {p["metadata"]["name"]: json.dumps(p["spec"].get("egress", []))
                for p in _of(objects, "NetworkPolicy")}
    for workload, pod, container in _containers(objects):
        env = _env(container)
        urls = [env[v]["value"] for v in DATABASE_URLS if v in env]
        name = workload["metadata"]["name"]
        if workload["metadata"]["labels"]["app.kubernetes.io/name"] not in (
                *DEFAULT_SERVICE_PORTS, "consola"):
            continue
        assert urls and all("@saga-db-rw:5432/" in url for url in urls), (name, container)
        # TLS with the server's certificate and name verified against CloudNativePG's CA.
        for url in urls:
            query = parse_qs(urlsplit(url).query)
            assert query.get("sslmode") == ["verify-full"], (name, container["name"])
            [rootcert] = query["sslrootcert"]
            assert _mounted_from(pod, container, rootcert)["secret"]["secretName"] == \
                "saga-db-ca", (name, container["name"])
        policy = name if workload["kind"] == "Deployment" else \
            f"{workload['metadata']['labels']['app.kubernetes.io/name']}-migrations"
        assert '"cnpg.io/cluster": "saga-db"' in policies[policy], policy
        if name.endswith("-worker") or name == "consola":
            if container in pod.get("initContainers", []):
                continue
            assert "KAFKA_SASL_PASSWORD" in env, name
            assert _mounted_from(pod, container, "/etc/saga/kafka-ca/ca.crt")["secret"][
                "secretName"] == "saga-kafka-cluster-ca-cert"
            assert '"strimzi.io/cluster": "saga-kafka"' in policies[name], name


@pytest.mark.external
def test_the_managed_overlay_runs_no_operator(managed_overlay: Objects) -> None:
    assert _operator_objects(managed_overlay) == []
    assert [n for n in OPERATOR_NAMES if n in json.dumps(managed_overlay)] == []
    # Nor alerts on the operators' pods, which would fire for ever (absent()).
    rules = [r for o in _of(managed_overlay, "PrometheusRule") for g in o["spec"]["groups"]
             for r in g["rules"]]
    assert rules and not [r["alert"] for r in rules
                          if 'service="kafka"' in r["expr"] or 'service="postgres"' in r["expr"]]


@pytest.mark.external
def test_every_database_url_of_the_managed_overlay_verifies_the_server(
        managed_overlay: Objects) -> None:
    """sslmode=verify-full (the certificate and the host name), with the CA of the ConfigMap
    the installer makes, mounted where the URL says: no container connects another way."""
    seen = 0
    for workload, pod, container in _containers(managed_overlay):
        for variable in DATABASE_URLS:
            if variable not in _env(container):
                continue
            seen += 1
            url = _env(container)[variable]["value"]
            query = parse_qs(urlsplit(url).query)
            where = f"{workload['metadata']['name']}/{container['name']}: {variable}"
            assert query.get("sslmode") == ["verify-full"], where
            [rootcert] = query["sslrootcert"]
            volume = _mounted_from(pod, container, rootcert)
            assert volume["configMap"]["name"] == "saga-db", where
    # Every service's API, worker and its init container, its migration Job; the console.
    assert seen == len(DEFAULT_SERVICE_PORTS) * 5 + 1


@pytest.mark.external
def test_every_kafka_client_of_the_managed_overlay_verifies_the_server(
        managed_overlay: Objects) -> None:
    """SASL over TLS everywhere a Kafka setting is given, and every process that is told where
    Kafka is has the managed Kafka's CA at KAFKA_SSL_CAFILE (the clients check the broker's
    certificate and name against it: sagakit.kafka, aiokafka's default context)."""
    settings = {o["metadata"]["name"]: o["data"] for o in _of(managed_overlay, "ConfigMap")
                if o["metadata"]["name"].endswith("-settings")}
    for name, data in settings.items():
        if any(k.startswith("KAFKA_") for k in data):
            assert data["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL", name
            assert data["KAFKA_SSL_CAFILE"], name
    clients = 0
    for workload, pod, container in _containers(managed_overlay):
        env = _env(container)
        if "KAFKA_BOOTSTRAP_SERVERS" not in env:
            continue
        clients += 1
        data = settings[next(ref["configMapRef"]["name"] for ref in container["envFrom"]
                             if ref["configMapRef"]["name"].endswith("-settings"))]
        assert data["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        assert env["KAFKA_BOOTSTRAP_SERVERS"]["valueFrom"]["configMapKeyRef"]["name"] == \
            "saga-kafka"
        volume = _mounted_from(pod, container, data["KAFKA_SSL_CAFILE"])
        assert volume["configMap"]["name"] == "saga-kafka", workload["metadata"]["name"]
    assert clients == len(DEFAULT_SERVICE_PORTS) + 1  # the workers and the console


@pytest.mark.external
def test_the_managed_overlay_lets_each_client_out_to_its_service(
        managed_overlay: Objects) -> None:
    """The base denies every egress it does not name: the overlay's policies open the managed
    services' addresses to the pods that connect to them."""
    def reachable_ports(labels: dict[str, str]) -> set[int]:
        out: set[int] = set()
        for policy in _of(managed_overlay, "NetworkPolicy"):
            selector = policy["spec"]["podSelector"]
            if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
                continue
            if any(labels.get(e["key"]) not in e["values"]
                   for e in selector.get("matchExpressions", [])):
                continue
            for rule in policy["spec"].get("egress", []):
                if any("ipBlock" in peer and "except" not in peer["ipBlock"]
                       for peer in rule.get("to", [])):
                    out |= {p["port"] for p in rule.get("ports", [])}
        return out
    for workload, _, container in _containers(managed_overlay):
        env = _env(container)
        ports = reachable_ports(workload["spec"]["template"]["metadata"]["labels"])
        name = workload["metadata"]["name"]
        if any(v in env for v in DATABASE_URLS):
            assert 5432 in ports, name
        if "KAFKA_BOOTSTRAP_SERVERS" in env:
            assert 9096 in ports, name
