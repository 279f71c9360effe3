"""Workers scaled on consumer lag (components/keda-workers, the `keda` overlay): each worker
has a KEDA ScaledObject in place of its CPU autoscaler, one Kafka trigger for each topic its
consumer group reads, signed in over SCRAM and TLS with a user that may only describe, and
stopped at the topics' partition count."""

from __future__ import annotations

from typing import Any

import pytest

from local_stack import kafka_auth
from saga_harness import scripts
from sagakit.kafka_topics import DEFAULT_TOPIC_PARTITIONS

generate = scripts.load("deploy/k8s/generate.py", "k8s_generate")


def lag_scaling_problems(objects: list[dict[str, Any]], managed: bool = False) -> list[str]:
    """What keeps a worker from being scaled on its lag, securely; ``managed``: on a managed
    Kafka (components/keda-managed-kafka), whose brokers the triggers take from the worker's own
    KAFKA_BOOTSTRAP_SERVERS and whose lag reader is no Strimzi KafkaUser."""
    out: list[str] = []
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for o in objects:
        by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
    scaled = by_kind.get("ScaledObject", {})
    for service in kafka_auth.SERVICES:
        worker = f"{service}-worker"
        if worker in by_kind.get("HorizontalPodAutoscaler", {}):
            out.append(f"{worker}: still scaled on CPU too")
        if worker not in scaled:
            out.append(f"{worker}: no ScaledObject")
            continue
        spec = scaled[worker]["spec"]
        if spec["scaleTargetRef"]["name"] != worker:
            out.append(f"{worker}: scales {spec['scaleTargetRef']['name']}")
        if spec.get("maxReplicaCount") != DEFAULT_TOPIC_PARTITIONS:
            out.append(f"{worker}: maxReplicaCount is not the {DEFAULT_TOPIC_PARTITIONS} "
                       "partitions")
        topics = set()
        for trigger in spec["triggers"]:
            meta = trigger["metadata"]
            topics.add(meta.get("topic"))
            if trigger["type"] != "kafka" or meta.get("consumerGroup") != service:
                out.append(f"{worker}: a trigger is not its consumer group's lag")
            if meta.get("sasl") != "scram_sha512" or meta.get("tls") != "enable":
                out.append(f"{worker}: a trigger does not sign in with SCRAM over TLS")
            if managed and not _brokers_from_the_workers_env(meta, by_kind, worker):
                out.append(f"{worker}: a trigger does not take the brokers the worker uses")
            auth = by_kind.get("TriggerAuthentication", {}).get(
                trigger.get("authenticationRef", {}).get("name", ""))
            if auth is None:
                out.append(f"{worker}: a trigger's TriggerAuthentication is missing")
                continue
            params = {r["parameter"] for r in auth["spec"].get("secretTargetRef", [])}
            params |= {r["parameter"] for r in auth["spec"].get("configMapTargetRef", [])}
            if not {"username", "password", "ca"} <= params:
                out.append(f"{auth['metadata']['name']}: no username, password and CA")
        if topics != set(kafka_auth.READS[service]):
            out.append(f"{worker}: triggers on {sorted(map(str, topics))}, not on the topics "
                       f"it reads {sorted(kafka_auth.READS[service])}")
    user = by_kind.get("KafkaUser", {}).get(generate.KEDA_USER)
    if managed:
        if user is not None:
            out.append(f"KafkaUser {generate.KEDA_USER}: a Strimzi user on a managed Kafka")
    elif user is None or any(acl["operations"] != ["Describe"]
                             for acl in user["spec"]["authorization"]["acls"]):
        out.append(f"KafkaUser {generate.KEDA_USER}: missing, or may do more than describe")
    return out


def _brokers_from_the_workers_env(meta: dict[str, Any],
                                  by_kind: dict[str, dict[str, dict[str, Any]]],
                                  worker: str) -> bool:
    """The trigger names no broker of its own, and reads the variable the worker's container
    connects with, which the managed Kafka's ConfigMap sets."""
    variable = meta.get("bootstrapServersFromEnv")
    if "bootstrapServers" in meta or variable != "KAFKA_BOOTSTRAP_SERVERS":
        return False
    container = by_kind["Deployment"][worker]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container.get("env", [])}
    return env.get(variable, {}).get("valueFrom", {}).get("configMapKeyRef") == {
        "name": "saga-kafka", "key": "bootstrap-servers"}


@pytest.mark.external
def test_the_keda_overlay_scales_every_worker_on_its_lag(
        every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    assert lag_scaling_problems(every_overlay["keda"]) == []


@pytest.mark.external
def test_the_default_overlay_scales_workers_on_cpu(
        default_overlay: list[dict[str, Any]]) -> None:
    assert "ScaledObject" not in {o["kind"] for o in default_overlay}
    assert lag_scaling_problems(default_overlay)


def test_the_rules_catch_a_worker_scaled_past_its_partitions_or_without_tls() -> None:
    objects = generate.keda_objects()
    assert lag_scaling_problems(objects) == []
    objects[-1]["spec"]["maxReplicaCount"] = 100
    objects[-2]["spec"]["triggers"][0]["metadata"]["tls"] = "disable"
    problems = lag_scaling_problems(objects)
    assert any("maxReplicaCount" in p for p in problems), problems
    assert any("SCRAM over TLS" in p for p in problems), problems


@pytest.mark.external
def test_keda_scales_every_worker_on_its_lag_on_a_managed_kafka(
        with_optional_components: dict[str, list[dict[str, Any]]]) -> None:
    """components/keda-workers then components/keda-managed-kafka on the managed overlay: the
    same scaling, signed in to the managed Kafka with its CA and the lag reader's Secret."""
    objects = with_optional_components["managed"]
    assert lag_scaling_problems(objects, managed=True) == []
    (auth,) = [o for o in objects if o["kind"] == "TriggerAuthentication"]
    refs = {r["parameter"]: (kind, r["name"], r["key"]) for kind in ("secretTargetRef",
                                                                       "configMapTargetRef")
            for r in auth["spec"][kind]}
    assert refs == {"username": ("configMapTargetRef", generate.KEDA_AUTH, "username"),
                    "password": ("secretTargetRef", f"saga-kafka-{generate.KEDA_USER}",
                                 "password"),
                    "ca": ("configMapTargetRef", "saga-kafka", "ca.crt")}
    # Without the managed component, the triggers would name Strimzi's brokers.
    assert lag_scaling_problems(objects) != []


def test_the_managed_rules_catch_a_trigger_on_brokers_of_its_own() -> None:
    objects = [*generate.keda_objects()]
    assert any("take the brokers" in p for p in lag_scaling_problems(
        [*objects, *_workers()], managed=True))


def _workers() -> list[dict[str, Any]]:
    return [{"kind": "Deployment", "metadata": {"name": f"{s}-worker"},
             "spec": {"template": {"spec": {"containers": [{"env": [{
                 "name": "KAFKA_BOOTSTRAP_SERVERS", "valueFrom": {"configMapKeyRef": {
                     "name": "saga-kafka", "key": "bootstrap-servers"}}}]}]}}}}
            for s in kafka_auth.SERVICES]


def test_the_lag_readers_acls_for_a_managed_kafka_are_its_strimzi_users() -> None:
    """docs/deploy.md lists them for a managed Kafka: describe, on the groups and the topics
    they read, nothing else."""
    acls = generate.keda_lag_reader_acls()
    assert acls and all(a.startswith(f"User:{generate.KEDA_USER} ") for a in acls)
    assert all(a.endswith(" DESCRIBE") for a in acls)
    assert {a.split()[1] for a in acls} == {"GROUP", "TOPIC"}
