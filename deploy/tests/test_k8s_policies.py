"""What the rendered manifests must be beyond their schemas: pinned registry-qualified images,
probes, non-root read-only containers with limits, no secret written out, autoscalers that stop
at the topics' partition count, durable topics, a database with connections for every process;
rollouts a GitOps tool can apply again (migration Jobs named by their release, pods that wait
for their schema, a preStop pause where traffic is served); workers nobody but Prometheus
reaches. Each rule is shown to catch a manifest that breaks it."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from local_stack.settings import DEFAULT_SERVICE_PORTS
from saga_harness import scripts
from sagakit.kafka_topics import DEFAULT_TOPIC_PARTITIONS

ROOT = Path(__file__).resolve().parents[2]
generate = scripts.load("deploy/k8s/generate.py", "k8s_generate")
SERVICES = tuple(DEFAULT_SERVICE_PORTS)
WORKLOADS = {"Deployment", "Job", "StatefulSet", "DaemonSet"}
AUTOSCALERS = {"HorizontalPodAutoscaler", "ScaledObject"}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|_KEYS?$|CREDENTIAL", re.I)
URL_PASSWORD = re.compile(r"://[^:/@\s]+:(?P<password>[^@\s]+)@")


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def _containers(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = _pod_spec(obj)
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def _name(obj: dict[str, Any]) -> str:
    return f"{obj['kind']} {obj['metadata']['name']}"


def _registry(image: str) -> str | None:
    """The registry an image reference names, None when it names none (and so Docker Hub's)."""
    first, slash, _ = image.partition("/")
    return first if slash and ("." in first or ":" in first or first == "localhost") else None


def _image_problems(obj: dict[str, Any]) -> Iterator[str]:
    for c in _containers(obj):
        image = c["image"]
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        if "@sha256:" not in image and (not tag or tag == "latest"):
            yield f"{_name(obj)}: image {image} has no pinned tag"
        if _registry(image) is None:
            yield f"{_name(obj)}: image {image} names no registry (it would be Docker Hub's)"


def _probe_problems(obj: dict[str, Any]) -> Iterator[str]:
    if obj["kind"] == "Job":
        return
    service = obj["metadata"].get("labels", {}).get("app.kubernetes.io/name")
    for c in _pod_spec(obj)["containers"]:
        for probe in ("readinessProbe", "livenessProbe"):
            if probe not in c:
                yield f"{_name(obj)}: container {c['name']} has no {probe}"
        if service in SERVICES:
            if c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/ready":
                yield f"{_name(obj)}: readiness is not /ready"
            if c.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/health":
                yield f"{_name(obj)}: liveness is not /health"


def _security_problems(obj: dict[str, Any]) -> Iterator[str]:
    pod = _pod_spec(obj).get("securityContext", {})
    for c in _containers(obj):
        own = c.get("securityContext", {})
        if not (own.get("runAsNonRoot") or pod.get("runAsNonRoot")):
            yield f"{_name(obj)}: container {c['name']} may run as root"
        if own.get("runAsUser", pod.get("runAsUser")) == 0:
            yield f"{_name(obj)}: container {c['name']} runs as root"
        if own.get("readOnlyRootFilesystem") is not True:
            yield f"{_name(obj)}: container {c['name']} has a writable root filesystem"
        if own.get("allowPrivilegeEscalation") is not False:
            yield f"{_name(obj)}: container {c['name']} may escalate privileges"


def _resource_problems(obj: dict[str, Any]) -> Iterator[str]:
    for c in _containers(obj):
        res = c.get("resources", {})
        for part in ("requests", "limits"):
            if not {"cpu", "memory"} <= set(res.get(part, {})):
                yield f"{_name(obj)}: container {c['name']} has no cpu and memory {part}"


def _secret_problems(obj: dict[str, Any]) -> Iterator[str]:
    if obj["kind"] == "Secret":
        yield f"{_name(obj)}: a Secret in the manifests (make it outside them: docs/deploy.md)"
    values: list[tuple[str, str]] = []
    if obj["kind"] == "ConfigMap":
        values += [(k, str(v)) for k, v in obj.get("data", {}).items()]
    if obj["kind"] in WORKLOADS:
        values += [(e["name"], str(e["value"])) for c in _containers(obj)
                   for e in c.get("env", []) if "value" in e]
    for key, value in values:
        if SECRET_NAME.search(key) and not (key.endswith("_FILE") or value.startswith("$(")):
            yield f"{_name(obj)}: {key} is given a value, not a reference to a Secret"
        for found in URL_PASSWORD.finditer(value):
            if not found["password"].startswith("$("):
                yield f"{_name(obj)}: {key} holds a URL with a password"


def _max_replicas(obj: dict[str, Any]) -> int:
    """An autoscaler's ceiling: a HorizontalPodAutoscaler's, or a KEDA ScaledObject's (KEDA's
    default, 100, when it names none)."""
    if obj["kind"] == "ScaledObject":
        return int(obj["spec"].get("maxReplicaCount", 100))
    return int(obj["spec"]["maxReplicas"])


def _autoscaler_problems(obj: dict[str, Any]) -> Iterator[str]:
    if _max_replicas(obj) > DEFAULT_TOPIC_PARTITIONS:
        yield (f"{_name(obj)}: maxReplicas {_max_replicas(obj)} is past the "
               f"{DEFAULT_TOPIC_PARTITIONS} partitions of the topics")


def _topic_problems(obj: dict[str, Any]) -> Iterator[str]:
    spec = obj["spec"]
    config = spec.get("config", {})
    if spec.get("replicas") != 3:
        yield f"{_name(obj)}: replicas {spec.get('replicas')}, not 3"
    if int(config.get("min.insync.replicas", 0)) != 2:
        yield f"{_name(obj)}: min.insync.replicas is not 2"
    if config.get("unclean.leader.election.enable") is not False:
        yield f"{_name(obj)}: unclean leader election is not off"
    if spec.get("partitions") != DEFAULT_TOPIC_PARTITIONS:
        yield f"{_name(obj)}: {spec.get('partitions')} partitions, not the local stack's"


def _kafka_problems(obj: dict[str, Any]) -> Iterator[str]:
    config = obj["spec"]["kafka"].get("config", {})
    for key, value in {"default.replication.factor": 3, "min.insync.replicas": 2,
                       "offsets.topic.replication.factor": 3,
                       "unclean.leader.election.enable": False,
                       "auto.create.topics.enable": False}.items():
        if config.get(key) != value:
            yield f"{_name(obj)}: {key} is {config.get(key)!r}, not {value!r}"
    for listener in obj["spec"]["kafka"]["listeners"]:
        if listener.get("authentication", {}).get("type") != "scram-sha-512":
            yield f"{_name(obj)}: listener {listener['name']} does not authenticate clients"
    if obj["spec"]["kafka"].get("authorization", {}).get("type") != "simple":
        yield f"{_name(obj)}: no ACLs"


def _serves_traffic(obj: dict[str, Any]) -> bool:
    return obj["kind"] == "Deployment" and obj["metadata"].get("labels", {}).get(
        "app.kubernetes.io/component") != "worker"


def _rollout_problems(obj: dict[str, Any]) -> Iterator[str]:
    """A Deployment that serves traffic pauses before it stops, for less than its grace period;
    a service's Deployments wait for their schema; a migration Job is named by its image's tag
    and the migration head it brings, and stays once done."""
    labels = obj["metadata"].get("labels", {})
    service = labels.get("app.kubernetes.io/name")
    spec = _pod_spec(obj)
    if _serves_traffic(obj):
        grace = spec.get("terminationGracePeriodSeconds", 30)
        for c in spec["containers"]:
            pause = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds")
            if pause is None:
                yield f"{_name(obj)}: container {c['name']} has no preStop pause"
            elif pause >= grace:
                yield (f"{_name(obj)}: preStop pause {pause} s is not shorter than its grace "
                       f"period {grace} s")
    if obj["kind"] == "Deployment" and service in SERVICES and not any(
            "sagakit.store.schema_wait" in c.get("command", [])
            for c in spec.get("initContainers", [])):
        yield f"{_name(obj)}: does not wait for its schema's migration head"
    if obj["kind"] == "Job" and labels.get("app.kubernetes.io/component") == "migrations":
        tag = spec["containers"][0]["image"].rsplit(":", 1)[-1]
        expected = generate.migration_job_name(service, tag)
        if obj["metadata"]["name"] != expected:
            yield (f"{_name(obj)}: not named by its release ({expected}): applied again with "
                   "another image it is refused")
        if "ttlSecondsAfterFinished" in obj["spec"]:
            yield f"{_name(obj)}: deleted when done, so every sync runs it again"


def _worker_ingress_problems(obj: dict[str, Any]) -> Iterator[str]:
    """A worker serves no traffic: only Prometheus (its metrics) may connect to it."""
    if obj["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "worker":
        return
    for rule in obj["spec"].get("ingress", []):
        peers = rule.get("from", [])
        if not peers or any(p.get("podSelector", {}).get("matchLabels")
                            != generate.PROMETHEUS_POD_LABELS for p in peers):
            yield f"{_name(obj)}: a worker accepts connections from others than Prometheus"


def _connection_problems(objects: list[dict[str, Any]]) -> Iterator[str]:
    """max_connections holds every process at its autoscaler's maximum, each with its pool."""
    clusters = [o for o in objects if o["kind"] == "Cluster"]
    pools = {o["metadata"]["name"].removesuffix("-settings"): int(o["data"]["DB_POOL_SIZE"])
             for o in objects if o["kind"] == "ConfigMap" and "DB_POOL_SIZE" in o.get("data", {})}
    demand = sum(_max_replicas(o) * (pools[o["metadata"]["labels"]["app.kubernetes.io/name"]] + 1)
                 for o in objects if o["kind"] in AUTOSCALERS)
    for cluster in clusters:
        have = int(cluster["spec"]["postgresql"]["parameters"]["max_connections"])
        if have < demand + 10:
            yield f"{_name(cluster)}: max_connections {have} < {demand} the services may open"


def _coverage_problems(objects: list[dict[str, Any]]) -> Iterator[str]:
    """Every Deployment of a service has its PodDisruptionBudget and one autoscaler."""
    budgets = {o["metadata"]["name"] for o in objects if o["kind"] == "PodDisruptionBudget"}
    scaled = [o["spec"]["scaleTargetRef"]["name"] for o in objects if o["kind"] in AUTOSCALERS]
    for o in objects:
        if o["kind"] == "Deployment" and o["metadata"]["labels"].get(
                "app.kubernetes.io/name") in SERVICES:
            if o["metadata"]["name"] not in budgets:
                yield f"{_name(o)}: no PodDisruptionBudget"
            if scaled.count(o["metadata"]["name"]) != 1:
                yield (f"{_name(o)}: {scaled.count(o['metadata']['name'])} autoscalers "
                       "(HorizontalPodAutoscaler or ScaledObject), not one")


def _worker_policy_coverage_problems(objects: list[dict[str, Any]]) -> Iterator[str]:
    """Every worker is selected by a NetworkPolicy that names it (the default deny, which
    selects every pod of the project, aside)."""
    selected = [o["spec"]["podSelector"].get("matchLabels", {}) for o in objects
                if o["kind"] == "NetworkPolicy"]
    for o in objects:
        pod = o["spec"]["template"]["metadata"]["labels"] if o["kind"] == "Deployment" else {}
        if pod.get("app.kubernetes.io/component") == "worker" and not any(
                "app.kubernetes.io/name" in sel and sel.items() <= pod.items()
                for sel in selected):
            yield f"{_name(o)}: no NetworkPolicy of its own"


def _namespace_problems(objects: list[dict[str, Any]]) -> Iterator[str]:
    """Everything in one namespace: the policies, Services and Secrets refer to each other by
    name within it."""
    namespaces = {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"}
    if len(namespaces) != 1 or None in namespaces:
        yield f"objects in namespaces {sorted(map(str, namespaces))}, not in one"


def policy_problems(objects: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for obj in objects:
        if obj["kind"] in WORKLOADS:
            for check in (_image_problems, _probe_problems, _security_problems,
                          _resource_problems, _rollout_problems):
                out += check(obj)
        out += _secret_problems(obj)
        if obj["kind"] in AUTOSCALERS:
            out += _autoscaler_problems(obj)
        if obj["kind"] == "KafkaTopic":
            out += _topic_problems(obj)
        if obj["kind"] == "Kafka":
            out += _kafka_problems(obj)
        if obj["kind"] == "NetworkPolicy":
            out += _worker_ingress_problems(obj)
    out += _connection_problems(objects)
    out += _coverage_problems(objects)
    out += _worker_policy_coverage_problems(objects)
    return out


@pytest.mark.external
def test_every_overlay_keeps_the_rules(
        every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    for overlay, objects in every_overlay.items():
        problems = policy_problems(objects) + list(_namespace_problems(objects))
        assert not problems, f"overlay {overlay}:\n" + "\n".join(problems)


@pytest.mark.external
def test_the_default_overlay_has_everything_the_saga_needs(
        default_overlay: list[dict[str, Any]]) -> None:
    kinds = {o["kind"] for o in default_overlay}
    assert {"Kafka", "KafkaNodePool", "KafkaTopic", "KafkaUser", "Cluster", "PrometheusRule",
            "ServiceMonitor", "NetworkPolicy", "PodDisruptionBudget", "HorizontalPodAutoscaler",
            "Job", "Deployment", "Service", "ConfigMap"} <= kinds
    assert all(o["metadata"].get("namespace") == "saga" for o in default_overlay
               if o["kind"] != "Namespace")
    deployments = {o["metadata"]["name"] for o in default_overlay if o["kind"] == "Deployment"}
    assert deployments == {f"{s}-{c}" for s in SERVICES for c in ("api", "worker")} | {
        "consola", "schema-registry"}
    jobs = {o["metadata"]["name"] for o in default_overlay if o["kind"] == "Job"}
    assert generate.registration_job_name() in jobs
    # The stand-in gateway and the smoke Job are development pieces, not the default's.
    assert not any(o["metadata"]["name"] in ("fake-gateway", "saga-smoke")
                   for o in default_overlay)
    cluster = next(o for o in default_overlay if o["kind"] == "Cluster")
    assert cluster["spec"]["instances"] == 3


def _sample() -> list[dict[str, Any]]:
    return copy.deepcopy([*(o for s, p in DEFAULT_SERVICE_PORTS.items()
                            for o in generate.service_objects(s, p)),
                          *generate.console_objects(), *generate.registry_objects(),
                          *generate.kafka_topics(), generate.database_cluster()])


def test_the_generated_objects_keep_the_rules() -> None:
    assert policy_problems(_sample()) == []


def _first(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


def _break(mutate: Any) -> list[str]:
    objects = _sample()
    mutate(objects)
    return policy_problems(objects)


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return _pod_spec(_first(objects, "Deployment"))["containers"][0]


def _worker_policy(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "NetworkPolicy"
                and o["metadata"]["name"] == "pedidos-worker")


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda o: _container(o).update(image="saga/pedidos:latest"), "no pinned tag"),
    (lambda o: _container(o).update(image="registry.invalid/saga/pedidos"), "no pinned tag"),
    (lambda o: _container(o).update(image="saga/pedidos:0.1.0"), "names no registry"),
    (lambda o: _container(o).pop("lifecycle"), "no preStop pause"),
    (lambda o: _pod_spec(_first(o, "Deployment")).update(terminationGracePeriodSeconds=10),
     "not shorter than its grace period"),
    (lambda o: _pod_spec(_first(o, "Deployment")).pop("initContainers"),
     "does not wait for its schema"),
    (lambda o: _first(o, "Job")["metadata"].update(name="pedidos-migrations"),
     "not named by its release"),
    (lambda o: _pod_spec(_first(o, "Job"))["containers"][0].update(
        image="registry.invalid/saga/pedidos:0.2.0"), "not named by its release"),
    (lambda o: _first(o, "Job")["spec"].update(ttlSecondsAfterFinished=600),
     "every sync runs it again"),
    (lambda o: _worker_policy(o)["spec"].update(
        ingress=[{"ports": [{"protocol": "TCP", "port": 8001}]}]), "others than Prometheus"),
    (lambda o: o.remove(_worker_policy(o)), "no NetworkPolicy of its own"),
    (lambda o: _container(o).pop("readinessProbe"), "no readinessProbe"),
    (lambda o: _container(o)["livenessProbe"]["httpGet"].update(path="/ready"),
     "liveness is not /health"),
    (lambda o: [d["securityContext"].pop("runAsNonRoot") for d in (
        _pod_spec(_first(o, "Deployment")), _container(o))], "may run as root"),
    (lambda o: _container(o)["securityContext"].update(readOnlyRootFilesystem=False),
     "writable root filesystem"),
    (lambda o: _container(o)["resources"].pop("limits"), "no cpu and memory limits"),
    (lambda o: _container(o)["env"].append({"name": "KAFKA_SASL_PASSWORD", "value": "hunter2"}),
     "not a reference to a Secret"),
    (lambda o: _container(o)["env"].append({
        "name": "DATABASE_URL", "value": "postgresql://pedidos_app:" + "hunter2" + "@db/saga"}),
     "URL with a password"),
    (lambda o: o.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                         "stringData": {"password": "hunter2"}}), "a Secret in the manifests"),
    (lambda o: _first(o, "HorizontalPodAutoscaler")["spec"].update(
        maxReplicas=DEFAULT_TOPIC_PARTITIONS + 1), "past the"),
    (lambda o: _first(o, "KafkaTopic")["spec"].update(replicas=1), "not 3"),
    (lambda o: _first(o, "KafkaTopic")["spec"]["config"].update({"min.insync.replicas": 1}),
     "min.insync.replicas is not 2"),
    (lambda o: _first(o, "KafkaTopic")["spec"]["config"].pop("unclean.leader.election.enable"),
     "unclean leader election"),
    (lambda o: _first(o, "Cluster")["spec"]["postgresql"]["parameters"].update(
        max_connections="100"), "max_connections 100"),
    (lambda o: o.remove(_first(o, "PodDisruptionBudget")), "no PodDisruptionBudget"),
    (lambda o: o.remove(_first(o, "HorizontalPodAutoscaler")), "0 autoscalers"),
    (lambda o: o.append(generate.keda_scaled_object("pedidos")), "2 autoscalers"),
])
def test_each_rule_catches_a_manifest_that_breaks_it(mutate: Any, expected: str) -> None:
    problems = _break(mutate)
    assert any(expected in p for p in problems), problems


def test_the_namespace_rule_catches_an_object_left_out() -> None:
    objects = [{**o, "metadata": {**o["metadata"], "namespace": "saga"}} for o in _sample()]
    assert list(_namespace_problems(objects)) == []
    objects[-1]["metadata"].pop("namespace")
    assert list(_namespace_problems(objects))


def test_the_kafka_rules_catch_a_cluster_that_loses_or_opens_data() -> None:
    kafka = next(o for o in yaml.safe_load_all((ROOT / "deploy/k8s/components/strimzi-kafka/kafka.yaml")
                                               .read_text()) if o["kind"] == "Kafka")
    assert list(_kafka_problems(kafka)) == []
    kafka["spec"]["kafka"]["config"]["min.insync.replicas"] = 1
    kafka["spec"]["kafka"]["listeners"][0].pop("authentication")
    problems = list(_kafka_problems(kafka))
    assert any("min.insync.replicas" in p for p in problems), problems
    assert any("does not authenticate" in p for p in problems), problems
