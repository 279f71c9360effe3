"""The optional components no overlay here includes, on the default overlay: the Gateway API's
routes (components/gateway-api) reach each public API and the console on its HTTP port, and the
External Secrets Operator's objects (components/external-secrets, and on a managed Kafka
components/external-secrets/managed-kafka) make every Secret the workloads read that no operator
makes. Their schemas and policies: test_k8s_schemas.py and
test_k8s_conftest.py."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from local_stack.settings import DEFAULT_SERVICE_PORTS

Objects = list[dict[str, Any]]
# Made by the operators themselves: Strimzi's cluster CA, CloudNativePG's (<cluster>-ca).
MADE_BY_OPERATORS = {"saga-kafka-cluster-ca-cert", "saga-db-ca"}


def _of(objects: Objects, kind: str) -> Objects:
    return [o for o in objects if o["kind"] == kind]


def _one(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    return next(o for o in _of(objects, kind) if o["metadata"]["name"] == name)


@pytest.mark.external
def test_each_public_api_and_the_console_has_a_route_to_its_http_port(
        with_optional_components: dict[str, Objects]) -> None:
    objects = with_optional_components["default"]
    routes = {r["metadata"]["name"]: r for r in _of(objects, "HTTPRoute")}
    assert set(routes) == {*DEFAULT_SERVICE_PORTS, "consola"}
    for name, route in routes.items():
        [ref] = [ref for rule in route["spec"]["rules"] for ref in rule["backendRefs"]]
        service = _one(objects, "Service", ref["name"])
        [http] = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]]
        assert http["name"] == "http", name  # never the metrics port
        # The gateway's pods are outside the namespace: the pods' policy takes that port from
        # anyone.
        selector = service["spec"]["selector"]
        [policy] = [p for p in _of(objects, "NetworkPolicy")
                    if p["spec"]["podSelector"].get("matchLabels") == selector]
        assert {"ports": [{"protocol": "TCP", "port": http["port"]}]} in \
            policy["spec"]["ingress"], name
        assert route["spec"]["parentRefs"][0]["kind"] == "Gateway"
    console_url = _one(objects, "ConfigMap", "consola-settings")["data"]["CONSOLA_PUBLIC_URL"]
    assert routes["consola"]["spec"]["hostnames"] == [urlsplit(console_url).hostname]


def _secrets_read(objects: Objects) -> set[tuple[str, str]]:
    """(Secret, key) of every Secret the workloads and the operators' objects read."""
    out: set[tuple[str, str]] = set()
    for workload in [*_of(objects, "Deployment"), *_of(objects, "Job")]:
        pod = workload["spec"]["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    out.add((ref["name"], ref["key"]))
        for volume in pod.get("volumes", []):
            if "secret" in volume:
                out |= {(volume["secret"]["secretName"], i["key"])
                        for i in volume["secret"]["items"]}
    for cluster in _of(objects, "Cluster"):
        basic_auth = [cluster["spec"]["bootstrap"]["initdb"]["secret"]["name"],
                      *(r["passwordSecret"]["name"] for r in cluster["spec"]["managed"]["roles"])]
        out |= {(name, key) for name in basic_auth for key in ("username", "password")}
    for store in _of(objects, "ObjectStore"):
        credentials = store["spec"]["configuration"]["s3Credentials"]
        out |= {(ref["name"], ref["key"]) for ref in credentials.values()}
    return out


@pytest.mark.external
def test_every_secret_whoever_installs_makes_has_an_external_secret(
        with_optional_components: dict[str, Objects]) -> None:
    objects = with_optional_components["default"]
    made_by_strimzi = {u["metadata"]["name"] for u in _of(objects, "KafkaUser")}
    needed = {(name, key) for name, key in _secrets_read(objects)
              if name not in MADE_BY_OPERATORS | made_by_strimzi}
    made: set[tuple[str, str]] = set()
    for external in _of(objects, "ExternalSecret"):
        target = external["spec"]["target"]
        keys = {d["secretKey"] for d in external["spec"]["data"]}
        template = target.get("template", {})
        if template:
            assert template["mergePolicy"] == "Merge"  # the fetched keys are kept
            keys |= set(template["data"])
        made |= {(target["name"], key) for key in keys}
        assert external["spec"]["secretStoreRef"]["kind"] == "ClusterSecretStore"
    assert needed - made == set()
    # A role's Secret keeps the type CloudNativePG reads it as.
    for external in _of(objects, "ExternalSecret"):
        template = external["spec"]["target"].get("template")
        if template:
            assert template["type"] == "kubernetes.io/basic-auth"


def _made_by_external_secrets(objects: Objects) -> set[tuple[str, str]]:
    made: set[tuple[str, str]] = set()
    for external in _of(objects, "ExternalSecret"):
        target = external["spec"]["target"]
        keys = {d["secretKey"] for d in external["spec"]["data"]}
        made |= {(target["name"], key) for key in {*keys, *target.get("template", {}).get(
            "data", {})}}
    return made


def _managed_kafka_secrets(objects: Objects) -> set[tuple[str, str]]:
    return {(name, key) for name, key in _secrets_read(objects) if name.startswith("saga-kafka-")}


@pytest.mark.external
def test_on_a_managed_kafka_every_users_secret_has_an_external_secret(
        with_optional_components: dict[str, Objects], managed_overlay: Objects) -> None:
    """The managed overlay's workers and console read a SCRAM password each from
    saga-kafka-<user>: components/external-secrets/managed-kafka makes every one, and the
    managed overlay alone reads them."""
    objects = with_optional_components["managed"]
    needed = _managed_kafka_secrets(managed_overlay)
    assert {name for name, _ in needed} == {
        f"saga-kafka-{user}" for user in (*DEFAULT_SERVICE_PORTS, "operator")}
    assert needed - _made_by_external_secrets(objects) == set()
    # Passwords only: no basic-auth template (Kafka's users are not CloudNativePG's roles).
    for external in _of(objects, "ExternalSecret"):
        if external["spec"]["target"]["name"].startswith("saga-kafka-"):
            assert "template" not in external["spec"]["target"]


@pytest.mark.external
def test_the_external_secrets_check_sees_a_users_secret_left_out(
        with_optional_components: dict[str, Objects], managed_overlay: Objects) -> None:
    objects = [o for o in with_optional_components["managed"]
               if not (o["kind"] == "ExternalSecret"
                       and o["metadata"]["name"] == "saga-kafka-pagos")]
    assert _managed_kafka_secrets(managed_overlay) - _made_by_external_secrets(objects) == {
        ("saga-kafka-pagos", "password")}
