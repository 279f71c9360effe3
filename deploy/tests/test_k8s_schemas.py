"""Every object the overlays render is valid against its schema, offline: Kubernetes' own (the
strict variant: an unknown field is an error, as `kubectl apply` makes it) and the custom
resource definitions of Strimzi, CloudNativePG and the Prometheus Operator, vendored at pinned
versions under deploy/k8s/schemas (its README says which and why)."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from saga_harness import scripts

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "deploy" / "k8s" / "schemas"
generate = scripts.load("deploy/k8s/generate.py", "k8s_generate")


@cache
def _kubernetes() -> dict[str, Any]:
    return json.loads(next(SCHEMAS.glob("kubernetes-v*.json")).read_text())


@cache
def _crds() -> dict[str, Any]:
    """crds.json, and the optional components' (crds-keda.json...)."""
    out: dict[str, Any] = {}
    for path in sorted(SCHEMAS.glob("crds*.json")):
        out |= json.loads(path.read_text())
    return out


@cache
def _validator(kind: str) -> jsonschema.protocols.Validator | None:
    kubernetes = _kubernetes()
    if kind in kubernetes["kinds"]:
        schema = {"$schema": kubernetes["$schema"], "$defs": kubernetes["$defs"],
                  **kubernetes["kinds"][kind]}
        return jsonschema.Draft202012Validator(schema)
    if kind in _crds():
        return jsonschema.Draft7Validator(_crds()[kind])
    return None


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """What is wrong with ``obj`` by its kind's schema; a kind with no schema is an error too."""
    kind = f"{obj.get('apiVersion')}/{obj.get('kind')}"
    name = f"{kind} {obj.get('metadata', {}).get('name')}"
    validator = _validator(kind)
    if validator is None:
        return [f"{name}: no schema for {kind} (deploy/k8s/schemas/vendor.py vendors them)"]
    return [f"{name}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(obj)]


@pytest.mark.external
def test_every_rendered_object_is_valid_against_its_schema(
        every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    for overlay, objects in every_overlay.items():
        assert objects, overlay
        errors = [e for obj in objects for e in schema_errors(obj)]
        assert not errors, f"overlay {overlay}:\n" + "\n".join(errors)


@pytest.mark.external
def test_the_optional_components_are_valid_against_their_schemas(
        with_optional_components: dict[str, list[dict[str, Any]]]) -> None:
    """components/gateway-api and components/external-secrets, which no overlay here includes,
    on the default and the managed overlay (conftest.OPTIONAL_COMPONENTS)."""
    for overlay, objects in with_optional_components.items():
        assert {"HTTPRoute", "ExternalSecret"} <= {o["kind"] for o in objects}, overlay
        errors = [e for obj in objects for e in schema_errors(obj)]
        assert not errors, f"overlay {overlay} with the optional components:\n" + "\n".join(errors)


def test_a_wrong_http_route_is_an_error() -> None:
    route = copy.deepcopy(generate.http_routes()[0])
    assert schema_errors(route) == []
    route["spec"]["rules"][0]["backendRefs"][0]["port"] = "http"
    assert schema_errors(route)


def test_a_wrong_external_secret_is_an_error() -> None:
    secret = copy.deepcopy(generate.external_secrets()[0])
    assert schema_errors(secret) == []
    secret["spec"]["secretStoreRef"]["kind"] = "Vault"
    assert schema_errors(secret)


def _generated(kind: str, name: str | None = None) -> dict[str, Any]:
    objects = [*generate.service_objects("pedidos", 8001), generate.service_monitor("pedidos"),
               *generate.kafka_topics(),
               *generate.kafka_users(), generate.database_cluster(), generate.prometheus_rule()]
    return copy.deepcopy(next(o for o in objects if o["kind"] == kind
                              and (name is None or o["metadata"]["name"] == name)))


def test_the_generated_objects_are_valid_as_they_are() -> None:
    for kind in ("Deployment", "Job", "HorizontalPodAutoscaler", "NetworkPolicy", "KafkaTopic",
                 "KafkaUser", "Cluster", "PrometheusRule", "ServiceMonitor"):
        assert schema_errors(_generated(kind)) == [], kind


def test_an_unknown_field_of_a_kubernetes_object_is_an_error() -> None:
    deployment = _generated("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    assert any("readinesProbe" in e for e in schema_errors(deployment))


def test_a_wrong_type_in_a_kubernetes_object_is_an_error() -> None:
    hpa = _generated("HorizontalPodAutoscaler")
    hpa["spec"]["maxReplicas"] = "six"
    assert any("maxReplicas" in e for e in schema_errors(hpa))


def test_a_wrong_custom_resource_is_an_error() -> None:
    topic = _generated("KafkaTopic")
    topic["spec"]["partitions"] = "six"
    assert any("partitions" in e for e in schema_errors(topic))
    cluster = _generated("Cluster")
    cluster["spec"]["instance"] = 3
    assert any("instance" in e for e in schema_errors(cluster))
    user = _generated("KafkaUser")
    user["spec"]["authorization"]["acls"][0]["operations"] = ["Scribble"]
    assert any("Scribble" in e for e in schema_errors(user))


def test_a_kind_without_a_schema_is_an_error() -> None:
    assert schema_errors({"apiVersion": "example.com/v1", "kind": "Widget",
                          "metadata": {"name": "w"}})
