"""Monitoring on a cluster: Prometheus scrapes each pod's metrics-only port with no token (no
operator token to expire or to abuse), that port is open to the monitoring namespace's
Prometheus pods and to nobody else, and the targets keep the metrics' own ``service`` label
(the Prometheus Operator would otherwise rename it ``exported_service`` and label every target
with the Kubernetes Service's name, ``pedidos`` or ``pedidos-worker``). What the Prometheus
Operator reads is an optional component (components/monitoring): without it, no overlay asks a
cluster for a kind it may not have."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from local_stack.settings import DEFAULT_SERVICE_PORTS, METRICS_PORT_OFFSET
from saga_harness import scripts

generate = scripts.load("deploy/k8s/generate.py", "k8s_generate")
OVERLAYS = Path(__file__).resolve().parents[1] / "k8s" / "overlays"


def _of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def metrics_problems(objects: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for deployment in _of(objects, "Deployment"):
        name = deployment["metadata"]["name"]
        service = deployment["metadata"]["labels"].get("app.kubernetes.io/name")
        if service not in DEFAULT_SERVICE_PORTS:
            continue
        port = DEFAULT_SERVICE_PORTS[service] + METRICS_PORT_OFFSET
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        if {"name": "metrics", "containerPort": port, "protocol": "TCP"} not in container["ports"]:
            out.append(f"{name}: no metrics port {port}")
        policies = [p for p in _of(objects, "NetworkPolicy")
                    if p["metadata"]["name"] == name]
        if len(policies) != 1:
            out.append(f"{name}: {len(policies)} NetworkPolicies")
            continue
        for rule in policies[0]["spec"]["ingress"]:
            if any(p["port"] == port for p in rule["ports"]) and rule.get("from") != [{
                    "namespaceSelector": {"matchLabels": {
                        "kubernetes.io/metadata.name": generate.MONITORING_NAMESPACE}},
                    "podSelector": {"matchLabels": generate.PROMETHEUS_POD_LABELS}}]:
                out.append(f"{name}: its metrics port is open to {rule.get('from', 'anyone')}")
        if not any(any(p["port"] == port for p in rule["ports"])
                   for rule in policies[0]["spec"]["ingress"]):
            out.append(f"{name}: Prometheus cannot reach its metrics port")
    monitors = _of(objects, "ServiceMonitor")
    if {m["metadata"]["name"] for m in monitors} != set(DEFAULT_SERVICE_PORTS):
        out.append(f"ServiceMonitors: {[m['metadata']['name'] for m in monitors]}")
    for monitor in monitors:
        name = monitor["metadata"]["name"]
        for endpoint in monitor["spec"]["endpoints"]:
            if endpoint["port"] != "metrics" or {"authorization", "bearerTokenSecret",
                                                 "bearerTokenFile"} & set(endpoint):
                out.append(f"ServiceMonitor {name}: not the metrics port with no token")
            if endpoint.get("honorLabels") is not True:
                out.append(f"ServiceMonitor {name}: the metrics' service label is renamed")
            if {"sourceLabels": ["__meta_kubernetes_service_label_app_kubernetes_io_name"],
                    "targetLabel": "service", "action": "replace"} not in endpoint.get(
                        "relabelings", []):
                out.append(f"ServiceMonitor {name}: targets labelled by Kubernetes Service")
        if monitor["spec"].get("jobLabel") != "app.kubernetes.io/name":
            out.append(f"ServiceMonitor {name}: job is the Kubernetes Service's name")
    for svc in _of(objects, "Service"):
        service = svc["metadata"]["labels"].get("app.kubernetes.io/name")
        if service in DEFAULT_SERVICE_PORTS and "metrics" not in {
                p["name"] for p in svc["spec"]["ports"]}:
            out.append(f"Service {svc['metadata']['name']}: no metrics port")
    return out


def _generated() -> list[dict[str, Any]]:
    # A service's objects in the base, and its ServiceMonitor in components/monitoring.
    return [o for s, p in DEFAULT_SERVICE_PORTS.items()
            for o in (*generate.service_objects(s, p), generate.service_monitor(s))]


def test_the_generated_objects_are_scraped_on_a_port_only_prometheus_reaches() -> None:
    assert metrics_problems(_generated()) == []
    settings = {o["metadata"]["name"]: o["data"] for o in _generated() if o["kind"] == "ConfigMap"}
    for service, port in DEFAULT_SERVICE_PORTS.items():
        assert settings[f"{service}-settings"]["METRICS_PORT"] == str(port + METRICS_PORT_OFFSET)
        assert settings[f"{service}-settings"]["METRICS_HOST"] == "0.0.0.0"


@pytest.mark.external
def test_every_overlay_is_scraped_on_a_port_only_prometheus_reaches(
        every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    for name, objects in every_overlay.items():
        assert metrics_problems(objects) == [], name


def _break(mutate: Any) -> list[str]:
    objects = _generated()
    mutate(objects)
    return metrics_problems(objects)


def _monitor(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(_of(objects, "ServiceMonitor")[0]["spec"]["endpoints"][0])


def _open_metrics(objects: list[dict[str, Any]]) -> None:
    for policy in _of(objects, "NetworkPolicy"):
        for rule in policy["spec"]["ingress"]:
            rule.pop("from", None)


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda o: _of(o, "ServiceMonitor")[0]["spec"]["endpoints"][0].update(
        port="http", authorization={"type": "Bearer"}), "not the metrics port with no token"),
    (lambda o: _of(o, "ServiceMonitor")[0]["spec"]["endpoints"][0].pop("honorLabels"),
     "service label is renamed"),
    (lambda o: _of(o, "ServiceMonitor")[0]["spec"]["endpoints"][0].pop("relabelings"),
     "labelled by Kubernetes Service"),
    (_open_metrics, "metrics port is open to anyone"),
])
def test_each_rule_catches_a_manifest_that_breaks_it(mutate: Any, expected: str) -> None:
    assert any(expected in p for p in _break(mutate)), _break(mutate)


@pytest.mark.external
def test_kafka_and_postgresql_are_scraped_too(default_overlay: list[dict[str, Any]]) -> None:
    """Strimzi's broker metrics and Kafka Exporter (consumer lag, offsets), and CloudNativePG's
    exporter, each found by a PodMonitor of components/monitoring (validated against the vendored
    CRDs by test_k8s_schemas)."""
    (kafka,) = [o for o in _of(default_overlay, "Kafka")]
    assert kafka["spec"]["kafka"]["metricsConfig"] == {"type": "strimziMetricsReporter"}
    assert kafka["spec"]["kafkaExporter"]["groupRegex"] == ".*"
    monitors = {m["metadata"]["name"]: m["spec"] for m in _of(default_overlay, "PodMonitor")}
    name = kafka["metadata"]["name"]
    assert monitors[name]["selector"]["matchLabels"] == {"strimzi.io/cluster": name}
    assert [e["port"] for e in monitors[name]["podMetricsEndpoints"]] == ["tcp-prometheus"]
    (cluster,) = [o for o in _of(default_overlay, "Cluster")]
    database = cluster["metadata"]["name"]
    assert monitors[database]["selector"]["matchLabels"] == {"cnpg.io/cluster": database}
    assert [e["port"] for e in monitors[database]["podMetricsEndpoints"]] == ["metrics"]
    # The Cluster's own (deprecated) PodMonitor is not asked for as well.
    assert not cluster["spec"].get("monitoring", {}).get("enablePodMonitor")


# The groups of the Prometheus Operator's custom resources.
OPERATOR_GROUP = "monitoring.coreos.com"


def _operator_kinds(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(f"{o['kind']} {o['metadata']['name']}" for o in objects
                  if o["apiVersion"].split("/")[0] == OPERATOR_GROUP)


@pytest.mark.external
def test_monitoring_is_a_component_the_default_overlay_includes(
        every_overlay: dict[str, list[dict[str, Any]]], tmp_path: Path,
        kustomize_build: Callable[[Path], list[dict[str, Any]]]) -> None:
    """The default overlay (and those built on it) has every ServiceMonitor, PodMonitor and the
    PrometheusRule; the same overlay without components/monitoring has none of them, and
    still everything else."""
    monitoring = ["PodMonitor saga-db", "PodMonitor saga-kafka", "PrometheusRule saga-alerts",
                  *(f"ServiceMonitor {s}" for s in sorted(DEFAULT_SERVICE_PORTS))]
    for overlay in ("default", "kind", "keda"):
        assert _operator_kinds(every_overlay[overlay]) == monitoring, overlay
    default = yaml.safe_load((OVERLAYS / "default" / "kustomization.yaml").read_text())
    assert "../../components/monitoring" in default["components"]
    without = {**default, "components": [c for c in default["components"]
                                         if c != "../../components/monitoring"]}

    def relative(entry: str) -> str:
        # kustomize takes no absolute path, nor a file outside the kustomization's folder.
        return os.path.relpath((OVERLAYS / "default" / entry).resolve(), tmp_path)
    without["resources"] = [relative(r) for r in default["resources"] if r != "namespace.yaml"]
    without["components"] = [relative(c) for c in without["components"]]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(without))
    objects = kustomize_build(tmp_path)
    assert _operator_kinds(objects) == []

    def names(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert names(every_overlay["default"]) - names(objects) == {
        ("Namespace", "saga"), *(tuple(m.split(" ")) for m in monitoring)}


@pytest.mark.external
def test_the_managed_overlay_scrapes_the_services_and_no_operators_pods(
        managed_overlay: list[dict[str, Any]]) -> None:
    assert _operator_kinds(managed_overlay) == [
        "PrometheusRule saga-alerts", *(f"ServiceMonitor {s}" for s in sorted(DEFAULT_SERVICE_PORTS))]
