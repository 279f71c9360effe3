"""Writes the parts of the Kubernetes manifests (deploy/k8s) that follow from the code and the
local stack, so that the three deployments cannot drift apart:

    uv run python deploy/k8s/generate.py            # rewrites the generated files
    uv run python deploy/k8s/generate.py --check    # exit 1 if one is out of date

- per service (services/<name>.yaml): its settings, its API and worker Deployments (the
  ``RUN_*`` switches; each waits for its schema's migration head, the API pauses before it
  stops), its migration Job named by its release (the only object given the schema owner's
  password),
  Services, PodDisruptionBudgets, HorizontalPodAutoscalers stopped at the topics' partition
  count and NetworkPolicy, all on the local stack's port;
- the schema registry (services/schema-registry.yaml): Apicurio Registry on the local stack's
  ports, its Deployment, Service, PodDisruptionBudget and NetworkPolicies, and the Job that
  registers every event schema (``sagactl schemas register``), named by the release and the
  schemas it registers;
- the issuer every service trusts (auth/settings.yaml: a placeholder for the OIDC issuer,
  the local stack's audience);
- the operator console (services/consola.yaml): its settings, Deployment, Service,
  PodDisruptionBudget and NetworkPolicy, on the local stack's port;
- the Kafka topics (saga_contracts.topics) and users, whose ACLs are the local stack's
  (local_stack.kafka_auth.acls), in components/strimzi-kafka;
- the PostgreSQL cluster's roles, the local stack's (an owner and an app role per service), in
  components/cloudnative-pg;
- components/monitoring's Prometheus Operator objects: a ServiceMonitor per service and the
  PrometheusRule, whose groups are deploy/prometheus/alerts.yml's and alerts.cluster.yml's;
- the optional component components/keda-workers' objects (scaled-objects.yaml): a KEDA
  ScaledObject a worker on its consumer group's lag, and the Kafka user KEDA reads it as;
- what Kafka and PostgreSQL bring, outside the base: components/strimzi-kafka's and
  components/cloudnative-pg's objects and patches, and components/managed-kafka's and
  components/managed-postgres' patches (each kustomization.yaml);
- components/gateway-api's HTTPRoutes and components/external-secrets' ExternalSecrets (and
  components/external-secrets/managed-kafka's, for a managed Kafka's users);
- components/keda-managed-kafka's patches: KEDA's lag scaling signed in to a managed Kafka.

What is written once and read by people (the Kafka cluster, kustomizations, overlays, the
other components) is not generated. deploy/tests/test_k8s_generated.py fails when a generated file
differs from what this writes.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from local_stack import identity, kafka_auth
from local_stack.passwords import READERS, reader_role
from local_stack.postgres.binaries import POSTGRES_MAJOR
from local_stack.registry.principals import PRINCIPALS as REGISTRY_PRINCIPALS
from local_stack.registry.server import ROLE as REGISTRY_ROLE
from local_stack.settings import (
    DEFAULT_CONSOLA_PORT,
    DEFAULT_SERVICE_PORTS,
    METRICS_PORT_OFFSET,
    PG_DB,
    REGISTRY_MANAGEMENT_PORT,
    REGISTRY_PORT,
)
from saga_contracts import topics
from saga_contracts.registry import all_schemas
from sagakit.kafka_topics import DEFAULT_TOPIC_PARTITIONS
from sagakit.store.schema_wait import expected_head

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s" / "base"
COMMAND = "python deploy/k8s/generate.py"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
# Alerts on what only a cluster scrapes (Kafka's and CloudNativePG's exporters).
CLUSTER_ALERTS = ROOT / "deploy" / "prometheus" / "alerts.cluster.yml"

# The images are named like this: a registry that never resolves (RFC 2606's .invalid), which
# an overlay replaces with its own (`images:` newName), so that no image is ever pulled from
# Docker Hub's namespace of that name; the tag is the release's, in the migration Jobs' names.
REGISTRY = "registry.invalid"
IMAGE_TAG = "0.1.0"
KAFKA_CLUSTER = "saga-kafka"
# Strimzi's bootstrap Service and the TLS listener of components/strimzi-kafka/kafka.yaml (SCRAM over TLS).
KAFKA_BOOTSTRAP = f"{KAFKA_CLUSTER}-kafka-bootstrap:9093"
KAFKA_CA_SECRET = f"{KAFKA_CLUSTER}-cluster-ca-cert"
# Where each client finds Kafka's CA: a file, mounted by the Kafka component (Strimzi's cluster
# CA, or the managed Kafka's from a ConfigMap the installer makes).
KAFKA_CA_FILE = "/etc/saga/kafka-ca/ca.crt"
DB_CLUSTER = "saga-db"
# The PostgreSQL image of the pinned version (deploy/postgres-version), as CloudNativePG's own
# catalog lists it (github.com/cloudnative-pg/artifacts, image-catalogs/
# catalog-standard-trixie.yaml, 2026-08-31): the "standard" image on Debian trixie, pinned by
# digest (a tag can be moved under it). The Cluster takes it from an ImageCatalog by major
# version, so that a minor update is one line here and the operator rolls it out.
DB_IMAGE = ("ghcr.io/cloudnative-pg/postgresql:18.6-202608310817-standard-trixie"
            "@sha256:c2a773217853c6e0ffe7da9c37ea456466efb20cf844f27511a73fa6a81e3152")
DB_IMAGE_CATALOG = "saga-postgresql"
# CloudNativePG's Service of the primary.
DB_HOST = f"{DB_CLUSTER}-rw"
# Each process holds DB_POOL_SIZE connections and one more (its relay's leader lock); the
# cluster's max_connections is sized for every autoscaler at its maximum (postgres/cluster.yaml,
# checked by deploy/tests/test_k8s_policies.py).
DB_POOL_SIZE = 10
MIN_REPLICAS = 2
PART_OF = "saga"
UID = 10001

# What each part of a service runs (sagakit.runtime.settings.ServiceSettings): the API serves
# HTTP only and needs no Kafka; the worker runs the consumer, the relay and the periodic jobs.
COMPONENTS = {
    "api": {"RUN_CONSUMER": "false", "RUN_RELAY": "false", "RUN_JOBS": "false"},
    "worker": {"RUN_CONSUMER": "true", "RUN_RELAY": "true", "RUN_JOBS": "true"},
}
# The payment token's keys (pedidos seals, pagos opens), mounted as files where they are used:
# pedidos seals in its API (orders are placed there); pagos opens only in the process that runs
# its gateway worker (the worker), never in its internet-facing API (pagos.app.create).
TOKEN_KEYS = {
    "pedidos": ("PEDIDOS_PAYMENT_TOKEN_SEAL_KEY_FILE", "pedidos-payment-token-seal-key", "seal-key"),
    "pagos": ("PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE", "pagos-payment-token-open-keys", "open-keys"),
}
# Settings of a service that differ from its defaults in a cluster: pagos' gateway is a setting
# (the fake gateway is a development stand-in, components/fake-gateway).
SERVICE_SETTINGS = {"pagos": {"GATEWAY_URL": "https://payment-gateway.example.com"}}
# The gateway's secret key pagos presents on every call: a Secret made by whoever installs
# (the fake gateway of components/fake-gateway checks the same one).
GATEWAY_SECRET = ("payment-gateway-secret-key", "secret-key")
# The secret pedidos keys its fingerprints of payment tokens and requests with: a Secret made by
# whoever installs, the same for every instance.
FINGERPRINT_KEY = ("pedidos-fingerprint-key", "key")


def holds_token_keys(service: str, component: str) -> bool:
    return service in TOKEN_KEYS and (service != "pagos" or component == "worker")
# Whose bearer tokens every service believes: one ConfigMap for all, with the audience the local
# stack's tokens name and no issuer: every container requires its AUTH_ISSUER key, which the
# installer's overlay adds (the local identity provider, a development stand-in, is
# components/identity-provider's); without it the pods do not start, rather than trust a default.
AUTH_SETTINGS = "saga-auth-settings"
# The operator console's address as the operators' browsers reach it (an Ingress of the
# installer's, in front of its Service), a placeholder an overlay sets; and the Secret that holds
# the key its session cookies are signed with, made by whoever installs (docs/deploy.md).
CONSOLE = "consola"
CONSOLE_PUBLIC_URL = "https://console.example.com"
CONSOLE_SESSION_SECRET = ("consola-session-secret", "secret")
# The console's own replay-signing key (its public half in saga-operator-public-keys, beside
# sagactl's), a Secret made by whoever installs (docs/deploy.md).
CONSOLE_SIGNING_KEY = ("consola-signing-key", "key")

# Prometheus scrapes each pod's metrics-only port (METRICS_PORT, no token: nothing to expire,
# nothing an operator could do with it), which the pod's NetworkPolicy opens to the Prometheus
# pods of the monitoring namespace and to nobody else. An overlay whose Prometheus runs
# elsewhere patches these selectors (docs/deploy.md).
METRICS_PORT_NAME = "metrics"
MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}

# The label the base's kustomization gives its objects, on a component's own objects too (a
# component's `labels` would relabel the overlay's objects as well).
MANAGED_BY = {"app.kubernetes.io/managed-by": "kustomize"}

GENERATED = (f"# Generated by `{COMMAND}` from the code and the local stack's settings; "
             "do not edit by hand.\n")


def labels(service: str, component: str | None = None) -> dict[str, str]:
    out = {"app.kubernetes.io/name": service, "app.kubernetes.io/part-of": PART_OF}
    if component is not None:
        out["app.kubernetes.io/component"] = component
    return out


def db_secret(service: str, kind: str) -> str:
    """The basic-auth Secret of a role (``username``, ``password``), which CloudNativePG's
    managed roles read too; made by whoever installs (docs/deploy.md), never committed."""
    return f"{DB_CLUSTER}-{service}-{kind}"


def database_env(service: str, kind: str) -> list[dict[str, Any]]:
    # The URL is put together by Kubernetes ($(VAR) expansion) from the role's Secret.
    return [
        {"name": "DATABASE_PASSWORD",
         "valueFrom": {"secretKeyRef": {"name": db_secret(service, kind), "key": "password"}}},
        {"name": "DATABASE_URL",
         "value": f"postgresql+asyncpg://{service}_{kind}:$(DATABASE_PASSWORD)"
                  f"@{DB_HOST}:5432/{PG_DB}"},
    ]


def security_context() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def pod_security_context() -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID, "fsGroup": UID,
            "seccompProfile": {"type": "RuntimeDefault"}}


def resources(cpu_limit: str, memory: str) -> dict[str, Any]:
    return {"requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": cpu_limit, "memory": memory}}


def image(service: str) -> str:
    return f"{REGISTRY}/saga/{service}:{IMAGE_TAG}"


def metrics_port(port: int) -> int:
    """The metrics-only port, the local stack's (local_stack.settings.metrics_port)."""
    return port + METRICS_PORT_OFFSET


def config_map(service: str, port: int) -> dict[str, Any]:
    data = {"SERVICE_NAME": service, "HTTP_HOST": "0.0.0.0", "HTTP_PORT": str(port),
            "METRICS_HOST": "0.0.0.0", "METRICS_PORT": str(metrics_port(port)),
            "DB_POOL_SIZE": str(DB_POOL_SIZE), "LOG_LEVEL": "INFO",
            # Where Kafka is (KAFKA_BOOTSTRAP_SERVERS) and its CA's file are the Kafka
            # component's (components/strimzi-kafka, or the managed overlay's).
            "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKA_SASL_MECHANISM": kafka_auth.MECHANISM, "KAFKA_SASL_USERNAME": service,
            "KAFKA_SSL_CAFILE": KAFKA_CA_FILE,
            **SERVICE_SETTINGS.get(service, {})}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{service}-settings", "labels": labels(service)}, "data": data}


def volumes_and_mounts(service: str, component: str) -> tuple[list[dict[str, Any]],
                                                              list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    if holds_token_keys(service, component):
        _, secret, key = TOKEN_KEYS[service]
        volumes.append({"name": "payment-token", "secret": {
            "secretName": secret, "items": [{"key": key, "path": key}]}})
        mounts.append({"name": "payment-token", "mountPath": "/etc/saga/payment-token",
                       "readOnly": True})
    return volumes, mounts


def issuer_env() -> dict[str, Any]:
    """AUTH_ISSUER, required: a pod whose saga-auth-settings has none does not start."""
    return {"name": "AUTH_ISSUER", "valueFrom": {"configMapKeyRef": {
        "name": AUTH_SETTINGS, "key": "AUTH_ISSUER", "optional": False}}}


def container_env(service: str, component: str) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in COMPONENTS[component].items()]
    env.append(issuer_env())
    if holds_token_keys(service, component):
        variable, _, key = TOKEN_KEYS[service]
        env.append({"name": variable, "value": f"/etc/saga/payment-token/{key}"})
    if service == "pedidos":
        name, key = FINGERPRINT_KEY
        env.append({"name": "PEDIDOS_FINGERPRINT_KEY",
                    "valueFrom": {"secretKeyRef": {"name": name, "key": key}}})
    if service == "pagos" and component == "worker":
        # Only the gateway worker calls the gateway (pagos.app.create).
        name, key = GATEWAY_SECRET
        env.append({"name": "PAGOS_GATEWAY_SECRET_KEY",
                    "valueFrom": {"secretKeyRef": {"name": name, "key": key}}})
    # The event schemas every part validates against and checks what it produces before it
    # starts (sagakit.schema_registry), read as the registry's read-only principal.
    reader = registry_secret("reader")
    env += [{"name": "SCHEMA_REGISTRY_URL",
             "value": REGISTRY_API},
            {"name": "SCHEMA_REGISTRY_USERNAME",
             "valueFrom": {"secretKeyRef": {"name": reader, "key": "username"}}},
            {"name": "SCHEMA_REGISTRY_PASSWORD",
             "valueFrom": {"secretKeyRef": {"name": reader, "key": "password"}}}]
    # Required where consumers run (the worker, which refuses to start them without a key):
    # only a replay the operator signed is believed (docs/deploy.md).
    env.append({"name": "SAGA_OPERATOR_PUBLIC_KEYS", "valueFrom": {"configMapKeyRef": {
        "name": "saga-operator-public-keys", "key": "keys",
        "optional": component != "worker"}}})
    return env


def probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period,
            "timeoutSeconds": 3, "failureThreshold": failures}


# Rollouts. A migration Job's template cannot change in place, so each release's Job has a name of
# its own: the image tag and the migration head it brings the schema to. Applying the same
# release again (kubectl apply, an Argo CD or Flux sync) finds the Job as it is and leaves it;
# a new release adds a new Job, and the GitOps tool prunes the old one. Every pod of a service
# first waits, in an init container, until the schema is at the head its image expects.
SCHEMA_WAIT_TIMEOUT_S = 900
# How long a pod that serves traffic keeps serving once told to stop, while the endpoints
# controller and every proxy take it out of rotation; the grace period covers that pause and
# the server's own shutdown (its in-flight requests).
PRE_STOP_PAUSE_S = 10
TERMINATION_GRACE_S = 45


@cache
def migration_head(service: str) -> str:
    return expected_head(ROOT / "services" / service / "alembic.ini")


def name_part(value: str) -> str:
    """``value`` as part of an object's name (lower case, digits and dashes)."""
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")


def migration_job_name(service: str, tag: str = IMAGE_TAG) -> str:
    return f"{service}-migrations-{name_part(tag)}-{name_part(migration_head(service))}"


def schema_wait_container(service: str) -> dict[str, Any]:
    """Holds the pod until the migration Job has brought the schema to this image's head,
    logging what it waits for (sagakit.store.schema_wait), as the app role."""
    return {
        "name": "wait-for-schema", "image": image(service), "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "sagakit.store.schema_wait",
                    "--alembic-ini", f"services/{service}/alembic.ini", "--schema", service,
                    "--timeout", str(SCHEMA_WAIT_TIMEOUT_S)],
        "resources": resources("200m", "128Mi"),
        "securityContext": security_context(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }


def pre_stop_pause() -> dict[str, Any]:
    # The kubelet's own sleep: the image needs no shell or sleep binary.
    return {"preStop": {"sleep": {"seconds": PRE_STOP_PAUSE_S}}}


def deployment(service: str, component: str, port: int) -> dict[str, Any]:
    volumes, mounts = volumes_and_mounts(service, component)
    name = f"{service}-{component}"
    container = {
        "name": service, "image": image(service), "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"},
                  {"name": METRICS_PORT_NAME, "containerPort": metrics_port(port),
                   "protocol": "TCP"}],
        "envFrom": [{"configMapRef": {"name": f"{service}-settings"}},
                    {"configMapRef": {"name": AUTH_SETTINGS}}],
        "env": container_env(service, component),
        # /health: the process answers; /ready: its database (and, in the worker, Kafka). It
        # answers once started, which waits up to SCHEMA_REGISTRY_START_TIMEOUT_S (120 s) for
        # the registration Job: the startup probe gives it 150 s.
        "startupProbe": probe("/health", 2, 75),
        "livenessProbe": probe("/health", 10, 3),
        "readinessProbe": probe("/ready", 5, 2),
        "resources": resources("1", "512Mi"),
        "securityContext": security_context(),
        "volumeMounts": mounts,
    }
    if component == "api":
        container["lifecycle"] = pre_stop_pause()
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels(service, component)},
        "spec": {
            # No replicas: the HorizontalPodAutoscaler owns the count.
            "selector": {"matchLabels": labels(service, component)},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": labels(service, component)},
                "spec": {
                    "serviceAccountName": service,
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security_context(),
                    # The API's: its preStop pause, then its shutdown. The worker's: longer
                    # than its stop, so that it finishes its gateway calls first.
                    "terminationGracePeriodSeconds":
                        TERMINATION_GRACE_S if component == "api" else 30,
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": labels(service, component)}}],
                    "initContainers": [schema_wait_container(service)],
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def migration_job(service: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": migration_job_name(service),
                     "labels": labels(service, "migrations")},
        "spec": {
            # Kept when done (no TTL): a Job that vanished would be made again and run again by
            # every sync of a GitOps tool; the next release's Job replaces it (see above).
            "backoffLimit": 6,
            "template": {
                "metadata": {"labels": labels(service, "migrations")},
                "spec": {
                    "serviceAccountName": service,
                    "automountServiceAccountToken": False,
                    "restartPolicy": "OnFailure",
                    "securityContext": pod_security_context(),
                    "containers": [{
                        "name": "migrations", "image": image(service),
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["alembic", "-c", f"services/{service}/alembic.ini",
                                    "upgrade", "head"],
                        "resources": resources("500m", "256Mi"),
                        "securityContext": security_context(),
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }


def services_of(service: str, port: int) -> list[dict[str, Any]]:
    ports = [{"name": "http", "port": port, "targetPort": "http"},
             {"name": METRICS_PORT_NAME, "port": metrics_port(port),
              "targetPort": METRICS_PORT_NAME}]
    api = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": service, "labels": labels(service, "api")},
           "spec": {"selector": labels(service, "api"), "ports": ports}}
    # The workers serve no traffic; their Service is what Prometheus finds their metrics by.
    worker = {"apiVersion": "v1", "kind": "Service",
              "metadata": {"name": f"{service}-worker", "labels": labels(service, "worker")},
              "spec": {"clusterIP": "None", "selector": labels(service, "worker"),
                       "ports": ports}}
    return [api, worker]


def disruption_budget(service: str, component: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": f"{service}-{component}", "labels": labels(service, component)},
            "spec": {"maxUnavailable": 1,
                     "selector": {"matchLabels": labels(service, component)}}}


def autoscaler(service: str, component: str) -> dict[str, Any]:
    # Past the partition count a worker's consumer gets no partition; the API is held to the
    # same count so that every autoscaler at its maximum fits PostgreSQL's max_connections.
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": f"{service}-{component}", "labels": labels(service, component)},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": f"{service}-{component}"},
                     "minReplicas": MIN_REPLICAS, "maxReplicas": DEFAULT_TOPIC_PARTITIONS,
                     "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu", "target": {"type": "Utilization",
                                                   "averageUtilization": 70}}}]}}


def dns_egress() -> dict[str, Any]:
    return {"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {
        "k8s-app": "kube-dns"}}}],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}


def database_egress() -> dict[str, Any]:
    return {"to": [{"podSelector": {"matchLabels": {"cnpg.io/cluster": DB_CLUSTER}}}],
            "ports": [{"protocol": "TCP", "port": 5432}]}


def kafka_egress() -> dict[str, Any]:
    return {"to": [{"podSelector": {"matchLabels": {"strimzi.io/cluster": KAFKA_CLUSTER,
                                                    "strimzi.io/kind": "Kafka"}}}],
            "ports": [{"protocol": "TCP", "port": 9093}]}


def https_egress() -> dict[str, Any]:
    """HTTPS to public addresses: the OIDC issuer, whose keys every part fetches to check the
    tokens it is sent, and pagos' payment gateway, both outside the cluster. An overlay that
    knows their addresses narrows this (components/identity-provider and
    components/fake-gateway add their in-cluster stand-ins)."""
    return {"to": [{"ipBlock": {"cidr": "0.0.0.0/0",
                                "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]}}],
            "ports": [{"protocol": "TCP", "port": 443}]}


def registry_egress() -> dict[str, Any]:
    """The schema registry's API, which every part of a service reads its schemas from."""
    return {"to": [{"podSelector": {"matchLabels": labels(REGISTRY_NAME, "registry")}}],
            "ports": [{"protocol": "TCP", "port": REGISTRY_PORT}]}


def prometheus_ingress(port: int) -> dict[str, Any]:
    """Prometheus' scrape of the metrics-only port, from the monitoring namespace's Prometheus
    pods only: the only connection a worker accepts (the kubelet's probes are not subject to
    NetworkPolicies)."""
    return {"from": [{"namespaceSelector": {"matchLabels": {
                          "kubernetes.io/metadata.name": MONITORING_NAMESPACE}},
                      "podSelector": {"matchLabels": PROMETHEUS_POD_LABELS}}],
            "ports": [{"protocol": "TCP", "port": metrics_port(port)}]}


def network_policies(service: str, port: int) -> list[dict[str, Any]]:
    """Who a service's pods may reach: DNS and its database always, the issuer (and pagos'
    gateway) over HTTPS and the schema registry from the API and the worker, Kafka from the
    worker; and who may reach
    them: anyone the API's HTTP port, Prometheus alone the metrics port of each."""
    def policy(component: str, egress: list[dict[str, Any]],
               ingress: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": f"{service}-{component}",
                             "labels": labels(service, component)},
                "spec": {"podSelector": {"matchLabels": labels(service, component)},
                         "policyTypes": ["Ingress", "Egress"],
                         "ingress": ingress, "egress": egress}}
    return [policy("api", [dns_egress(), https_egress(), registry_egress()],
                   [{"ports": [{"protocol": "TCP", "port": port}]}, prometheus_ingress(port)]),
            policy("worker", [dns_egress(), https_egress(), registry_egress()],
                   [prometheus_ingress(port)]),
            policy("migrations", [dns_egress()], [])]


def service_monitor(service: str) -> dict[str, Any]:
    """Both Services of the service (API and worker), on their metrics-only port, with no
    token. The operator labels each target with the Kubernetes Service's name as ``service``
    (``pedidos`` or ``pedidos-worker``), which would push the metrics' own ``service`` label
    aside (``exported_service``) and split every ``by (service)`` in two: the samples' own
    labels are kept (``honorLabels``), the target's ``service`` is the service's name (for the
    metrics that carry none), and so is its ``job``."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": {"name": service, "labels": {**labels(service), **MANAGED_BY}},
            "spec": {"selector": {"matchLabels": labels(service)},
                     "jobLabel": "app.kubernetes.io/name",
                     "endpoints": [{"port": METRICS_PORT_NAME, "path": "/metrics",
                                    "interval": "15s", "honorLabels": True,
                                    "relabelings": [{
                                        "sourceLabels": [
                                            "__meta_kubernetes_service_label_app_kubernetes_io_name"],
                                        "targetLabel": "service", "action": "replace"}]}]}}


def service_objects(service: str, port: int) -> list[dict[str, Any]]:
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": service, "labels": labels(service)},
               "automountServiceAccountToken": False}
    return [account, config_map(service, port), migration_job(service),
            *(deployment(service, c, port) for c in COMPONENTS),
            *services_of(service, port),
            *(disruption_budget(service, c) for c in COMPONENTS),
            *(autoscaler(service, c) for c in COMPONENTS),
            *network_policies(service, port)]


def console_objects(port: int = DEFAULT_CONSOLA_PORT) -> list[dict[str, Any]]:
    """The operator console: stateless (its session is a signed cookie, the sign-in's state
    too), so two replicas behind one Service; it holds no credential but its cookie key,
    ``console_reader``'s password (the services' published views, nothing else), its
    replay-signing key and the Kafka ``operator`` user's password (replays, never as the
    admin), and reaches only the issuer (HTTPS), the database, Kafka and the services' APIs,
    with the operators' own tokens."""
    component = "web"
    settings = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"{CONSOLE}-settings", "labels": labels(CONSOLE)},
                "data": {"CONSOLA_HOST": "0.0.0.0", "CONSOLA_PORT": str(port),
                         "CONSOLA_PUBLIC_URL": CONSOLE_PUBLIC_URL,
                         "CONSOLA_SECURE_COOKIE": "true",
                         "CONSOLA_PEDIDOS_URL": f"http://pedidos:{DEFAULT_SERVICE_PORTS['pedidos']}",
                         "CONSOLA_PAGOS_URL": f"http://pagos:{DEFAULT_SERVICE_PORTS['pagos']}",
                         "CONSOLA_INVENTARIO_URL":
                             f"http://inventario:{DEFAULT_SERVICE_PORTS['inventario']}",
                         # Replays are published as the least-privilege operator user.
                         "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                         "KAFKA_SASL_MECHANISM": kafka_auth.MECHANISM,
                         "KAFKA_SASL_USERNAME": kafka_auth.OPERATOR,
                         "KAFKA_SSL_CAFILE": KAFKA_CA_FILE}}
    secret_name, secret_key = CONSOLE_SESSION_SECRET
    signing_name, signing_key = CONSOLE_SIGNING_KEY
    container = {
        "name": CONSOLE, "image": image(CONSOLE), "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "envFrom": [{"configMapRef": {"name": f"{CONSOLE}-settings"}},
                    {"configMapRef": {"name": AUTH_SETTINGS}}],
        "env": [issuer_env(),
                {"name": "CONSOLA_SESSION_SECRET",
                 "valueFrom": {"secretKeyRef": {"name": secret_name, "key": secret_key}}},
                {"name": "CONSOLA_SIGNING_KEY",
                 "valueFrom": {"secretKeyRef": {"name": signing_name, "key": signing_key}}}],
        "startupProbe": probe("/health", 2, 30),
        "livenessProbe": probe("/health", 10, 3),
        "readinessProbe": probe("/health", 5, 2),
        "resources": resources("500m", "256Mi"),
        "securityContext": security_context(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "lifecycle": pre_stop_pause(),
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": CONSOLE, "labels": labels(CONSOLE, component)},
        "spec": {
            "replicas": MIN_REPLICAS,
            "selector": {"matchLabels": labels(CONSOLE, component)},
            "template": {
                "metadata": {"labels": labels(CONSOLE, component)},
                "spec": {
                    "serviceAccountName": CONSOLE,
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security_context(),
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": CONSOLE, "labels": labels(CONSOLE, component)},
               "spec": {"selector": labels(CONSOLE, component),
                        "ports": [{"name": "http", "port": port, "targetPort": "http"}]}}
    apis = [{"to": [{"podSelector": {"matchLabels": labels(name, "api")}}],
             "ports": [{"protocol": "TCP", "port": DEFAULT_SERVICE_PORTS[name]}]}
            for name in ("pedidos", "inventario", "pagos")]
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": CONSOLE, "labels": labels(CONSOLE, component)},
              "spec": {"podSelector": {"matchLabels": labels(CONSOLE, component)},
                       "policyTypes": ["Ingress", "Egress"],
                       "ingress": [{"ports": [{"protocol": "TCP", "port": port}]}],
                       "egress": [dns_egress(), https_egress(), *apis]}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": CONSOLE, "labels": labels(CONSOLE)},
               "automountServiceAccountToken": False}
    return [account, settings, deployment, service,
            disruption_budget(CONSOLE, component), policy]


# The schema registry (Apicurio Registry, docs/operations.md "The schema registry"): the image
# deploy/docker/registry.Dockerfile builds, on the local stack's ports (the API, and its health
# checks and metrics on the management port). Its artifacts are in PostgreSQL, in the schema
# `registry` its role owns (deploy/postgres/schemas.sql; the database component adds the JDBC URL
# and the password). Its two principals' passwords are Secrets made by whoever installs
# (docs/deploy.md): the deployer's, which the registration Job writes with, and the reader's.
REGISTRY_NAME = "schema-registry"
REGISTRY_REPLICAS = 2
# Its connection pool's most (deploy/docker/registry/start.py, apicurio.datasource.jdbc.max-size).
REGISTRY_POOL_SIZE = 10
REGISTRY_HOME = "/var/lib/registry"
REGISTRY_API = f"http://{REGISTRY_NAME}:{REGISTRY_PORT}/apis/registry/v3"
# The image whose sagactl and contracts register the schemas: any service's holds both.
REGISTRATION_IMAGE = "pedidos"


def registry_secret(principal: str) -> str:
    """The basic-auth Secret of a registry principal (``username``, ``password``)."""
    return f"{REGISTRY_NAME}-{principal}"


def schemas_digest() -> str:
    """A digest of every schema version the contracts hold: a new one names a new Job."""
    documents = {f"{t}/{s.version}": s.document for t, v in all_schemas().items() for s in v}
    return hashlib.sha256(json.dumps(documents, sort_keys=True).encode()).hexdigest()[:10]


def registration_job_name(tag: str = IMAGE_TAG) -> str:
    return f"schema-registration-{name_part(tag)}-{schemas_digest()}"


def management_probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": "management"}, "periodSeconds": period,
            "timeoutSeconds": 3, "failureThreshold": failures}


def registry_deployment() -> dict[str, Any]:
    component = "registry"
    env = [{"name": "REGISTRY_DATASOURCE_USERNAME", "value": REGISTRY_ROLE},
           *({"name": f"REGISTRY_{principal.upper()}_PASSWORD", "valueFrom": {"secretKeyRef": {
               "name": registry_secret(principal), "key": "password"}}}
             for principal in REGISTRY_PRINCIPALS)]
    container = {
        "name": REGISTRY_NAME, "image": image(REGISTRY_NAME), "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": REGISTRY_PORT, "protocol": "TCP"},
                  {"name": "management", "containerPort": REGISTRY_MANAGEMENT_PORT,
                   "protocol": "TCP"}],
        "env": env,
        # Quarkus' health checks: live once the JVM serves, ready once its database answers
        # and its tables are made (the first start makes them: a longer startup allowance).
        "startupProbe": management_probe("/health/live", 3, 60),
        "livenessProbe": management_probe("/health/live", 10, 3),
        "readinessProbe": management_probe("/health/ready", 5, 2),
        # The JVM's heap is 512 MiB (start.py); the rest is its code, threads and buffers.
        "resources": {"requests": {"cpu": "100m", "memory": "768Mi"},
                      "limits": {"cpu": "1", "memory": "1Gi"}},
        "securityContext": security_context(),
        # start.py writes its settings file into its working folder at each start.
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},
                         {"name": "settings", "mountPath": REGISTRY_HOME}],
        "lifecycle": pre_stop_pause(),
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": REGISTRY_NAME, "labels": labels(REGISTRY_NAME, component)},
        "spec": {
            "replicas": REGISTRY_REPLICAS,
            "selector": {"matchLabels": labels(REGISTRY_NAME, component)},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": labels(REGISTRY_NAME, component)},
                "spec": {
                    "serviceAccountName": REGISTRY_NAME,
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security_context(),
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": labels(REGISTRY_NAME, component)}}],
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
                                {"name": "settings", "emptyDir": {"sizeLimit": "1Mi"}}],
                },
            },
        },
    }


def registration_job() -> dict[str, Any]:
    """Every schema version of the contracts into the registry as the deployer, once per
    release and set of schemas (the name says both, as a migration Job's does). Until the
    registry answers, the command fails and the Job tries again (backoffLimit)."""
    deployer = registry_secret("deployer")
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": registration_job_name(),
                     "labels": labels(REGISTRY_NAME, "registration")},
        "spec": {
            "backoffLimit": 8,
            "template": {
                "metadata": {"labels": labels(REGISTRY_NAME, "registration")},
                "spec": {
                    "serviceAccountName": REGISTRY_NAME,
                    "automountServiceAccountToken": False,
                    "restartPolicy": "OnFailure",
                    "securityContext": pod_security_context(),
                    "containers": [{
                        "name": "registration", "image": image(REGISTRATION_IMAGE),
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sagactl", "schemas", "register"],
                        "env": [{"name": "SAGACTL_REGISTRY_URL", "value": REGISTRY_API},
                                {"name": "SAGACTL_REGISTRY_USERNAME", "valueFrom": {
                                    "secretKeyRef": {"name": deployer, "key": "username"}}},
                                {"name": "SAGACTL_REGISTRY_PASSWORD", "valueFrom": {
                                    "secretKeyRef": {"name": deployer, "key": "password"}}}],
                        "resources": resources("500m", "256Mi"),
                        "securityContext": security_context(),
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }


def registry_network_policies() -> list[dict[str, Any]]:
    """The registry: its API from the namespace's own pods (the registration Job, the
    services, the console), its health and metrics port from Prometheus; out, DNS and its
    database (the database component's). The registration Job: DNS and the registry's API."""
    own_pods = {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}}
    prometheus = {**prometheus_ingress(0),
                  "ports": [{"protocol": "TCP", "port": REGISTRY_MANAGEMENT_PORT}]}
    registry = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": REGISTRY_NAME, "labels": labels(REGISTRY_NAME, "registry")},
                "spec": {"podSelector": {"matchLabels": labels(REGISTRY_NAME, "registry")},
                         "policyTypes": ["Ingress", "Egress"],
                         "ingress": [{"from": [own_pods],
                                      "ports": [{"protocol": "TCP", "port": REGISTRY_PORT}]},
                                     prometheus],
                         "egress": [dns_egress()]}}
    registration = {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "schema-registration",
                     "labels": labels(REGISTRY_NAME, "registration")},
        "spec": {"podSelector": {"matchLabels": labels(REGISTRY_NAME, "registration")},
                 "policyTypes": ["Ingress", "Egress"], "ingress": [],
                 "egress": [dns_egress(), {
                     "to": [{"podSelector": {"matchLabels": labels(REGISTRY_NAME, "registry")}}],
                     "ports": [{"protocol": "TCP", "port": REGISTRY_PORT}]}]}}
    return [registry, registration]


def registry_objects() -> list[dict[str, Any]]:
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": REGISTRY_NAME, "labels": labels(REGISTRY_NAME)},
               "automountServiceAccountToken": False}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": REGISTRY_NAME, "labels": labels(REGISTRY_NAME, "registry")},
               "spec": {"selector": labels(REGISTRY_NAME, "registry"),
                        "ports": [{"name": "http", "port": REGISTRY_PORT, "targetPort": "http"},
                                  {"name": "management", "port": REGISTRY_MANAGEMENT_PORT,
                                   "targetPort": "management"}]}}
    budget = {**disruption_budget(REGISTRY_NAME, "registry")}
    budget["metadata"] = {**budget["metadata"], "name": REGISTRY_NAME}
    return [account, registry_deployment(), service, budget, registration_job(),
            *registry_network_policies()]


def auth_settings() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": AUTH_SETTINGS, "labels": {"app.kubernetes.io/part-of": PART_OF}},
            "data": {"AUTH_AUDIENCE": identity.AUDIENCE}}


def kafka_topics() -> list[dict[str, Any]]:
    return [{"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
             "metadata": {"name": topic, "labels": {"strimzi.io/cluster": KAFKA_CLUSTER,
                                                   **MANAGED_BY}},
             "spec": {"partitions": DEFAULT_TOPIC_PARTITIONS, "replicas": 3,
                      "config": {"min.insync.replicas": 2,
                                 "unclean.leader.election.enable": False}}}
            for topic in topics.ALL_TOPICS]


def kafka_users() -> list[dict[str, Any]]:
    """One SCRAM user a service, and the operator's (replays of dead letters), each allowed
    what the local stack's ACLs allow it."""
    out = []
    for service in (*kafka_auth.SERVICES, kafka_auth.OPERATOR):
        acls = [{"type": "allow",
                 "resource": {"type": acl.resource_type.lower(), "name": acl.name,
                              "patternType": "literal"},
                 "operations": [acl.operation.capitalize()], "host": "*"}
                for acl in kafka_auth.acls() if acl.principal == service]
        out.append({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaUser",
                    "metadata": {"name": service, "labels": {
                        "strimzi.io/cluster": KAFKA_CLUSTER, **labels(service), **MANAGED_BY}},
                    "spec": {"authentication": {"type": "scram-sha-512"},
                             "authorization": {"type": "simple", "acls": acls}}})
    return out


# Workers scaled on their consumer lag (components/keda-workers, optional): a KEDA ScaledObject a
# worker, one Kafka trigger a topic it reads, in place of the worker's CPU autoscaler. KEDA reads
# the lag with a Kafka user of its own that may only describe (no read, no write).
KEDA_COMPONENT = ROOT / "deploy" / "k8s" / "components" / "keda-workers"
KEDA_USER = "keda-lag-reader"
KEDA_AUTH = "saga-kafka-lag"
# Messages behind per worker before KEDA adds one.
LAG_THRESHOLD = 50


def keda_user() -> dict[str, Any]:
    groups = [{"type": "allow", "resource": {"type": "group", "name": service,
                                             "patternType": "literal"},
               "operations": ["Describe"], "host": "*"} for service in kafka_auth.SERVICES]
    topics_read = sorted({t for service in kafka_auth.SERVICES for t in kafka_auth.READS[service]})
    topics_acls = [{"type": "allow", "resource": {"type": "topic", "name": topic,
                                                  "patternType": "literal"},
                    "operations": ["Describe"], "host": "*"} for topic in topics_read]
    return {"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaUser",
            "metadata": {"name": KEDA_USER, "labels": {"strimzi.io/cluster": KAFKA_CLUSTER,
                                                       "app.kubernetes.io/part-of": PART_OF}},
            "spec": {"authentication": {"type": "scram-sha-512"},
                     "authorization": {"type": "simple", "acls": groups + topics_acls}}}


def keda_trigger_authentication() -> list[dict[str, Any]]:
    """SCRAM over TLS, as the services: the user's name from a ConfigMap, its password from
    the Secret Strimzi makes for it, the cluster's CA from Strimzi's."""
    user = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": KEDA_AUTH, "labels": {"app.kubernetes.io/part-of": PART_OF}},
            "data": {"username": KEDA_USER}}
    auth = {"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
            "metadata": {"name": KEDA_AUTH, "labels": {"app.kubernetes.io/part-of": PART_OF}},
            "spec": {"configMapTargetRef": [
                         {"parameter": "username", "name": KEDA_AUTH, "key": "username"}],
                     "secretTargetRef": [
                         {"parameter": "password", "name": KEDA_USER, "key": "password"},
                         {"parameter": "ca", "name": KAFKA_CA_SECRET, "key": "ca.crt"}]}}
    return [user, auth]


def keda_scaled_object(service: str) -> dict[str, Any]:
    name = f"{service}-worker"
    triggers = [{"type": "kafka", "authenticationRef": {"name": KEDA_AUTH},
                 "metadata": {"bootstrapServers": KAFKA_BOOTSTRAP, "consumerGroup": service,
                              "topic": topic, "lagThreshold": str(LAG_THRESHOLD),
                              "sasl": "scram_sha512", "tls": "enable",
                              # A new group's lag counts from the end: nothing to catch up.
                              "offsetResetPolicy": "latest"}}
                for topic in kafka_auth.READS[service]]
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name, "labels": labels(service, "worker")},
            "spec": {"scaleTargetRef": {"name": name},
                     "minReplicaCount": MIN_REPLICAS,
                     # Past the partition count a consumer gets no partition.
                     "maxReplicaCount": DEFAULT_TOPIC_PARTITIONS,
                     "triggers": triggers}}


def keda_lag_reader_acls() -> list[str]:
    """What the lag reader may do, as a managed Kafka's ACLs (kafka-acls.sh's words)."""
    user = keda_user()
    return [f"User:{KEDA_USER} {acl['resource']['type'].upper()} LITERAL "
            f"{acl['resource']['name']} {acl['operations'][0].upper()}"
            for acl in user["spec"]["authorization"]["acls"]]


# KEDA on a managed Kafka (components/keda-managed-kafka, after components/keda-workers): the
# brokers' addresses from the workers' own KAFKA_BOOTSTRAP_SERVERS (components/managed-kafka
# takes it from the ConfigMap saga-kafka), the lag reader's password from the Secret
# saga-kafka-keda-lag-reader, the CA from that ConfigMap, and no Strimzi KafkaUser.
KEDA_MANAGED_COMPONENT = ROOT / "deploy" / "k8s" / "components" / "keda-managed-kafka"


def keda_managed_kafka_patches() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{
        "target": {"kind": "KafkaUser", "name": KEDA_USER},
        "patch": yaml.safe_dump({"$patch": "delete", "apiVersion": "kafka.strimzi.io/v1",
                                 "kind": "KafkaUser", "metadata": {"name": KEDA_USER}},
                                sort_keys=False)}]
    out.append(patch("TriggerAuthentication", KEDA_AUTH, [
        {"op": "replace", "path": "/spec/configMapTargetRef", "value": [
            {"parameter": "username", "name": KEDA_AUTH, "key": "username"},
            {"parameter": "ca", "name": MANAGED_KAFKA, "key": "ca.crt"}]},
        {"op": "replace", "path": "/spec/secretTargetRef", "value": [
            {"parameter": "password", "name": f"{MANAGED_KAFKA}-{KEDA_USER}",
             "key": "password"}]}]))
    for service in kafka_auth.SERVICES:
        ops: list[Patch] = []
        for index, _ in enumerate(keda_scaled_object(service)["spec"]["triggers"]):
            at = f"/spec/triggers/{index}/metadata"
            ops += [{"op": "test", "path": f"{at}/bootstrapServers", "value": KAFKA_BOOTSTRAP},
                    {"op": "remove", "path": f"{at}/bootstrapServers"},
                    {"op": "add", "path": f"{at}/bootstrapServersFromEnv",
                     "value": "KAFKA_BOOTSTRAP_SERVERS"}]
        out.append(patch("ScaledObject", f"{service}-worker", ops))
    return out


def keda_objects() -> list[dict[str, Any]]:
    return [keda_user(), *keda_trigger_authentication(),
            *(keda_scaled_object(service) for service in kafka_auth.SERVICES)]


def reader_secret(consumer: str) -> str:
    """The basic-auth Secret of a read views' consumer's login role (docs/deploy.md)."""
    return f"{DB_CLUSTER}-{consumer}-reader"


def database_roles() -> list[dict[str, Any]]:
    """CloudNativePG's managed roles: the local stack's owner and app role per service, and
    the read views' consumers (each a member of every ``<service>_reader``, which
    deploy/postgres/schemas.sql makes)."""
    return [*({"name": f"{service}_{kind}", "ensure": "present", "login": True,
               "inherit": True, "connectionLimit": -1,
               "passwordSecret": {"name": db_secret(service, kind)}}
              for service in DEFAULT_SERVICE_PORTS for kind in ("owner", "app")),
            *({"name": reader_role(consumer), "ensure": "present", "login": True,
               "inherit": True, "connectionLimit": -1,
               "inRoles": [f"{service}_reader" for service in DEFAULT_SERVICE_PORTS],
               "passwordSecret": {"name": reader_secret(consumer)}}
              for consumer in READERS),
            # The schema registry's, owner of its schema: it makes its tables itself.
            {"name": REGISTRY_ROLE, "ensure": "present", "login": True, "inherit": True,
             "connectionLimit": -1, "passwordSecret": {"name": db_secret("registry", "owner")}}]


def max_connections() -> int:
    """Every autoscaler at its maximum, each process with its pool and its leader lock, the
    migration Jobs, and room for an operator and CloudNativePG's own connections."""
    processes = len(DEFAULT_SERVICE_PORTS) * len(COMPONENTS) * DEFAULT_TOPIC_PARTITIONS
    return (processes * (DB_POOL_SIZE + 1) + len(DEFAULT_SERVICE_PORTS) * 2 + 50
            + REGISTRY_REPLICAS * REGISTRY_POOL_SIZE)


def image_catalog() -> dict[str, Any]:
    """The namespace's PostgreSQL images by major version: only the pinned one."""
    return {
        "apiVersion": "postgresql.cnpg.io/v1", "kind": "ImageCatalog",
        "metadata": {"name": DB_IMAGE_CATALOG,
                     "labels": {"app.kubernetes.io/part-of": PART_OF, **MANAGED_BY}},
        "spec": {"images": [{"major": POSTGRES_MAJOR, "image": DB_IMAGE}]},
    }


def database_cluster() -> dict[str, Any]:
    return {
        "apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
        "metadata": {"name": DB_CLUSTER,
                     "labels": {"app.kubernetes.io/part-of": PART_OF, **MANAGED_BY}},
        "spec": {
            "instances": 3,
            "imageCatalogRef": {"apiGroup": "postgresql.cnpg.io", "kind": "ImageCatalog",
                                "name": DB_IMAGE_CATALOG, "major": POSTGRES_MAJOR},
            "primaryUpdateStrategy": "unsupervised",
            "enableSuperuserAccess": False,
            "postgresql": {"parameters": {"max_connections": str(max_connections())}},
            "bootstrap": {"initdb": {
                "database": PG_DB, "owner": "saga_admin",
                "secret": {"name": f"{DB_CLUSTER}-admin"},
                # The services' schemas and grants, the SQL docker-compose's PostgreSQL runs
                # too (deploy/postgres/schemas.sql, a ConfigMap made from that very file).
                "postInitApplicationSQLRefs": {"configMapRefs": [
                    {"name": "saga-db-schemas", "key": "schemas.sql"}]}}},
            "managed": {"roles": database_roles()},
            "storage": {"size": "20Gi"},
            "affinity": {"enablePodAntiAffinity": True,
                         "topologyKey": "kubernetes.io/hostname"},
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                          "limits": {"cpu": "2", "memory": "2Gi"}},
        },
    }


# What the services need of Kafka and PostgreSQL is not in the base: a component brings it, either
# with the operator that runs them in the cluster (components/strimzi-kafka,
# components/cloudnative-pg) or for a managed service outside it (components/managed-kafka,
# components/managed-postgres, which overlays/managed uses). Each adds, by JSON patches of the
# base's objects: the bootstrap address and the Kafka user's password, Kafka's CA as a file,
# each role's DATABASE_URL, and the NetworkPolicy egress to the operator's pods (a managed
# service's egress is a NetworkPolicy of the overlay's own, on its addresses).
COMPONENTS_DIR = ROOT / "deploy" / "k8s" / "components"
# The managed services' coordinates, made by whoever installs (docs/deploy.md): a ConfigMap
# with Kafka's bootstrap servers and its CA, a Secret per Kafka user with its SCRAM password, a
# ConfigMap with PostgreSQL's host, port and CA (the roles' passwords are the same Secrets as
# CloudNativePG's, db_secret()).
MANAGED_KAFKA = "saga-kafka"
MANAGED_DB = "saga-db"
DB_CA_DIR = "/etc/saga/db-ca"
Patch = dict[str, Any]


def kafka_users_of() -> dict[tuple[str, str], str]:
    """The Deployments that talk to Kafka, and the Kafka user each is."""
    return {**{("Deployment", f"{service}-worker"): service for service in kafka_auth.SERVICES},
            ("Deployment", CONSOLE): kafka_auth.OPERATOR}


def database_clients() -> list[tuple[dict[str, Any], str, str, str]]:
    """Every container that connects to PostgreSQL: (the base object, its container's path,
    the role, the URL's variable)."""
    out: list[tuple[dict[str, Any], str, str, str]] = []
    for service, port in DEFAULT_SERVICE_PORTS.items():
        for component in COMPONENTS:
            obj = deployment(service, component, port)
            out.append((obj, "/spec/template/spec/containers/0", f"{service}_app", "DATABASE"))
            out.append((obj, "/spec/template/spec/initContainers/0", f"{service}_app",
                        "DATABASE"))
        out.append((migration_job(service), "/spec/template/spec/containers/0",
                    f"{service}_owner", "DATABASE"))
    console = next(o for o in console_objects() if o["kind"] == "Deployment")
    out.append((console, "/spec/template/spec/containers/0", reader_role("console"),
                "CONSOLA_DATABASE"))
    out.append((registry_deployment(), "/spec/template/spec/containers/0", REGISTRY_ROLE,
                "REGISTRY_DATASOURCE"))
    return out


def role_secret(role: str) -> str:
    """The basic-auth Secret of a role, by its name (``pedidos_app``, ``console_reader``)."""
    for service in DEFAULT_SERVICE_PORTS:
        for kind in ("owner", "app"):
            if role == f"{service}_{kind}":
                return db_secret(service, kind)
    if role == REGISTRY_ROLE:
        return db_secret("registry", "owner")
    return reader_secret(role.removesuffix("_reader"))


def database_url(role: str, variable: str, host: str, query: str = "") -> str:
    if variable == "REGISTRY_DATASOURCE":
        # JDBC, for the registry: its user and password are settings of their own.
        return f"jdbc:postgresql://{host}/{PG_DB}{query}"
    # asyncpg through SQLAlchemy for the services, asyncpg alone for the console.
    scheme = "postgresql" if variable == "CONSOLA_DATABASE" else "postgresql+asyncpg"
    return f"{scheme}://{role}:$({variable}_PASSWORD)@{host}/{PG_DB}{query}"


def _at(obj: dict[str, Any], path: str) -> Any:
    node: Any = obj
    for part in path.strip("/").split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def append_ops(obj: dict[str, Any], path: str, items: list[Any]) -> list[Patch]:
    """JSON patch operations that append ``items`` to the list at ``path`` of ``obj``, making
    the list if the base has none."""
    parent, _, key = path.rpartition("/")
    if key in _at(obj, parent):
        return [{"op": "add", "path": f"{path}/-", "value": item} for item in items]
    return [{"op": "add", "path": path, "value": items}]


def patch(kind: str, name: str, ops: list[Patch]) -> dict[str, Any]:
    return {"target": {"kind": kind, "name": name},
            "patch": yaml.safe_dump(ops, sort_keys=False, width=100)}


def base_object(kind: str, name: str) -> dict[str, Any]:
    objects = [*console_objects(), *registry_objects(),
               *(o for service, port in DEFAULT_SERVICE_PORTS.items()
                 for o in service_objects(service, port))]
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def kafka_patches(managed: bool) -> list[dict[str, Any]]:
    """Kafka's address, each user's password and Kafka's CA for every Deployment that talks to
    it; with Strimzi, the egress to its brokers too."""
    out = []
    if not managed:
        for name in (*(f"{s}-settings" for s in DEFAULT_SERVICE_PORTS), f"{CONSOLE}-settings"):
            out.append(patch("ConfigMap", name, [{
                "op": "add", "path": "/data/KAFKA_BOOTSTRAP_SERVERS", "value": KAFKA_BOOTSTRAP}]))
    for (kind, name), user in kafka_users_of().items():
        obj = base_object(kind, name)
        container = "/spec/template/spec/containers/0"
        if managed:
            env = [{"name": "KAFKA_BOOTSTRAP_SERVERS", "valueFrom": {"configMapKeyRef": {
                       "name": MANAGED_KAFKA, "key": "bootstrap-servers"}}},
                   {"name": "KAFKA_SASL_PASSWORD", "valueFrom": {"secretKeyRef": {
                       "name": f"{MANAGED_KAFKA}-{user}", "key": "password"}}}]
            volume = {"name": "kafka-ca", "configMap": {
                "name": MANAGED_KAFKA, "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
        else:
            # The Secret Strimzi's user operator makes for the KafkaUser of that name.
            env = [{"name": "KAFKA_SASL_PASSWORD", "valueFrom": {"secretKeyRef": {
                "name": user, "key": "password"}}}]
            volume = {"name": "kafka-ca", "secret": {
                "secretName": KAFKA_CA_SECRET, "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
        mount = {"name": "kafka-ca", "mountPath": KAFKA_CA_FILE.rpartition("/")[0],
                 "readOnly": True}
        ops = [*append_ops(obj, f"{container}/env", env),
               *append_ops(obj, f"{container}/volumeMounts", [mount]),
               *append_ops(obj, "/spec/template/spec/volumes", [volume])]
        out.append(patch(kind, name, ops))
        if not managed:
            out.append(patch("NetworkPolicy", name, [
                {"op": "add", "path": "/spec/egress/-", "value": kafka_egress()}]))
    return out


def database_patches(managed: bool) -> list[dict[str, Any]]:
    """Each role's DATABASE_URL where it connects; with CloudNativePG, its Service and the egress
    to its instances; managed, the host and port of a ConfigMap, TLS with the server's
    certificate verified against the CA that ConfigMap holds."""
    ops_of: dict[tuple[str, str], list[Patch]] = {}
    for obj, container, role, variable in database_clients():
        env: list[dict[str, Any]] = [{"name": f"{variable}_PASSWORD", "valueFrom": {
            "secretKeyRef": {"name": role_secret(role), "key": "password"}}}]
        if managed:
            env += [{"name": f"{variable}_HOST", "valueFrom": {"configMapKeyRef": {
                        "name": MANAGED_DB, "key": "host"}}},
                    {"name": f"{variable}_PORT", "valueFrom": {"configMapKeyRef": {
                        "name": MANAGED_DB, "key": "port"}}},
                    {"name": f"{variable}_URL", "value": database_url(
                        role, variable, f"$({variable}_HOST):$({variable}_PORT)",
                        f"?sslmode=verify-full&sslrootcert={DB_CA_DIR}/ca.crt")}]
        else:
            # CloudNativePG issues the server's certificate (its names include the -rw
            # Service's) from the CA in the Secret <cluster>-ca: verified like a managed one.
            env.append({"name": f"{variable}_URL", "value": database_url(
                role, variable, f"{DB_HOST}:5432",
                f"?sslmode=verify-full&sslrootcert={DB_CA_DIR}/ca.crt")})
        key = (obj["kind"], obj["metadata"]["name"])
        ops = ops_of.setdefault(key, [])
        ops += append_ops(obj, f"{container}/env", env)
        ops += append_ops(obj, f"{container}/volumeMounts", [
            {"name": "db-ca", "mountPath": DB_CA_DIR, "readOnly": True}])
    out = []
    for (kind, name), ops in ops_of.items():
        ca = ({"configMap": {"name": MANAGED_DB, "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
              if managed else
              {"secret": {"secretName": f"{DB_CLUSTER}-ca",
                          "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
        ops.append({"op": "add", "path": "/spec/template/spec/volumes/-",
                    "value": {"name": "db-ca", **ca}})
        out.append(patch(kind, name, ops))
    if not managed:
        policies = [*(f"{s}-{c}" for s in DEFAULT_SERVICE_PORTS
                      for c in (*COMPONENTS, "migrations")), CONSOLE, REGISTRY_NAME]
        out += [patch("NetworkPolicy", name, [
                    {"op": "add", "path": "/spec/egress/-", "value": database_egress()}])
                for name in policies]
    return out


def component(header: str, resources: list[str], patches: list[dict[str, Any]]) -> str:
    body: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1alpha1", "kind": "Component"}
    if resources:
        body["resources"] = resources
    body["patches"] = patches
    return (GENERATED + "".join(f"# {line}\n" if line else "#\n"
                                for line in header.splitlines())
            + yaml.safe_dump(body, sort_keys=False, width=100))


STRIMZI_HEADER = """\
Kafka run by Strimzi in the cluster: the Kafka cluster and its node pools (kafka.yaml, written
by hand), the topics and the services' SCRAM users with their ACLs, and what the services need
of it (the patches below: the bootstrap Service, the password Secret Strimzi makes per user,
Strimzi's cluster CA, egress to the brokers). Prometheus' scrape of the brokers and the exporter
is components/monitoring's."""
CNPG_HEADER = """\
PostgreSQL run by CloudNativePG in the cluster: the Cluster with the services' roles and
schemas (and the schema registry's), its image catalog, and what the services need of it (the
patches below: each role's DATABASE_URL, the registry's JDBC URL, on the primary's Service,
over TLS verified against the cluster's CA, egress to the instances). Prometheus' scrape of its
instances is components/monitoring's."""
MANAGED_KAFKA_HEADER = f"""\
A managed Kafka (SASL/SCRAM over TLS), reached as the ConfigMap {MANAGED_KAFKA} says (keys
bootstrap-servers and ca.crt, the CA its certificate chains to), each user with the password
of the Secret {MANAGED_KAFKA}-<user> (key password), both made by whoever installs
(docs/deploy.md). The egress to it is the overlay's (overlays/managed/egress.yaml)."""
KEDA_MANAGED_HEADER = f"""\
KEDA's lag scaling (components/keda-workers, which this follows in an overlay's components) on
a managed Kafka (components/managed-kafka): each trigger takes the brokers from its worker's own
KAFKA_BOOTSTRAP_SERVERS (the ConfigMap {MANAGED_KAFKA}'s bootstrap-servers), and the
TriggerAuthentication {KEDA_AUTH} signs in as the SCRAM user {KEDA_USER} over TLS,
with the password of the Secret {MANAGED_KAFKA}-{KEDA_USER} (key password), trusting the
ConfigMap's ca.crt. The user, made on your Kafka with describe-only ACLs, and the Secret are
yours (docs/deploy.md). Strimzi's KafkaUser for it is removed."""
MANAGED_DB_HEADER = f"""\
A managed PostgreSQL, reached as the ConfigMap {MANAGED_DB} says (keys host, port and ca.crt,
the CA its certificate chains to), over TLS with its certificate and name verified
(sslmode=verify-full); each role's password from the same Secrets CloudNativePG would read,
made by whoever installs (docs/deploy.md). The egress to it is the overlay's
(overlays/managed/egress.yaml)."""


# What the internet reaches (components/gateway-api, optional): an HTTPRoute per public API and
# one for the operator console, each on a host name of its own, attached to a Gateway the
# installer runs (its name and namespace, and the host names, are placeholders an overlay sets:
# docs/deploy.md). Only the HTTP port is routed: the metrics port stays Prometheus' alone.
GATEWAY = {"name": "saga-gateway", "namespace": "gateway", "sectionName": "https"}


def public_host(name: str) -> str:
    return (urlsplit(CONSOLE_PUBLIC_URL).hostname or "") if name == CONSOLE \
        else f"{name}.example.com"


def http_route(name: str, port: int, component: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "labels": {**labels(name, component), **MANAGED_BY}},
            "spec": {"parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                     **GATEWAY}],
                     "hostnames": [public_host(name)],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                                "backendRefs": [{"name": name, "port": port}]}]}}


def http_routes() -> list[dict[str, Any]]:
    return [*(http_route(service, port, "api") for service, port in DEFAULT_SERVICE_PORTS.items()),
            http_route(CONSOLE, DEFAULT_CONSOLA_PORT, "web")]


# The Secrets docs/deploy.md has whoever installs make by hand, made instead by the External
# Secrets Operator from a secret manager (components/external-secrets, optional): one
# ExternalSecret each, read through a ClusterSecretStore the installer configures, from a remote
# key of the same name under a prefix (both placeholders an overlay sets: docs/deploy.md). The
# roles' Secrets keep their basic-auth type and user name; only the password is remote.
SECRET_STORE = "saga-secrets"
REMOTE_PREFIX = "saga/"
REFRESH = "1h"


def installer_secrets() -> list[tuple[str, str | None, list[str]]]:
    """(Secret, user name of a basic-auth one, the keys of another)."""
    roles = [(f"{DB_CLUSTER}-admin", "saga_admin"),
             *((db_secret(service, kind), f"{service}_{kind}")
               for service in DEFAULT_SERVICE_PORTS for kind in ("owner", "app")),
             *((reader_secret(consumer), reader_role(consumer)) for consumer in READERS),
             (db_secret("registry", "owner"), REGISTRY_ROLE),
             *((registry_secret(principal), principal) for principal in REGISTRY_PRINCIPALS)]
    keyed = [GATEWAY_SECRET, (TOKEN_KEYS["pagos"][1], TOKEN_KEYS["pagos"][2]),
             (TOKEN_KEYS["pedidos"][1], TOKEN_KEYS["pedidos"][2]), CONSOLE_SESSION_SECRET,
             FINGERPRINT_KEY, CONSOLE_SIGNING_KEY]
    # The backups' object storage credentials (components/backups).
    backups = ("saga-db-backup-credentials", None, ["ACCESS_KEY_ID", "ACCESS_SECRET_KEY"])
    return [*((name, user, ["password"]) for name, user in roles),
            *((name, None, [key]) for name, key in keyed), backups]


def external_secret(name: str, user: str | None, keys: list[str]) -> dict[str, Any]:
    target: dict[str, Any] = {"name": name, "creationPolicy": "Owner"}
    if user is not None:
        # The user name from the template, the password as it is fetched (Merge).
        target["template"] = {"type": "kubernetes.io/basic-auth", "engineVersion": "v2",
                              "mergePolicy": "Merge", "data": {"username": user}}
    return {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": PART_OF,
                                                  **MANAGED_BY}},
            "spec": {"refreshInterval": REFRESH,
                     "secretStoreRef": {"kind": "ClusterSecretStore", "name": SECRET_STORE},
                     "target": target,
                     "data": [{"secretKey": key, "remoteRef": {
                         "key": f"{REMOTE_PREFIX}{name}", "property": key}} for key in keys]}}


def external_secrets() -> list[dict[str, Any]]:
    return [external_secret(*secret) for secret in installer_secrets()]


def managed_kafka_secrets() -> list[str]:
    """The Secrets components/managed-kafka reads a SCRAM password from, one a Kafka user."""
    return [f"{MANAGED_KAFKA}-{user}" for user in (*kafka_auth.SERVICES, kafka_auth.OPERATOR)]


def managed_kafka_external_secrets() -> list[dict[str, Any]]:
    return [external_secret(name, None, ["password"]) for name in managed_kafka_secrets()]


def component_files() -> dict[Path, str]:
    strimzi = COMPONENTS_DIR / "strimzi-kafka"
    cnpg = COMPONENTS_DIR / "cloudnative-pg"
    return {
        strimzi / "topics.yaml": dump(kafka_topics(), "saga_contracts.topics"),
        strimzi / "users.yaml": dump(kafka_users(), "local_stack.kafka_auth.acls()"),
        strimzi / "kustomization.yaml": component(
            STRIMZI_HEADER, ["kafka.yaml", "topics.yaml", "users.yaml"],
            kafka_patches(managed=False)),
        cnpg / "cluster.yaml": dump(
            [image_catalog(), database_cluster()],
            "deploy/postgres-version (image), local_stack (roles), deploy/k8s/generate.py"),
        cnpg / "kustomization.yaml": component(
            CNPG_HEADER, ["cluster.yaml", "../../../postgres"],
            database_patches(managed=False)),
        COMPONENTS_DIR / "managed-kafka" / "kustomization.yaml": component(
            MANAGED_KAFKA_HEADER, [], kafka_patches(managed=True)),
        COMPONENTS_DIR / "managed-postgres" / "kustomization.yaml": component(
            MANAGED_DB_HEADER, [], database_patches(managed=True)),
        COMPONENTS_DIR / "gateway-api" / "routes.yaml": dump(
            http_routes(), "deploy/k8s/generate.py, local_stack.settings (ports)"),
        COMPONENTS_DIR / "external-secrets" / "external-secrets.yaml": dump(
            external_secrets(), "deploy/k8s/generate.py (the Secrets docs/deploy.md lists)"),
        COMPONENTS_DIR / "external-secrets" / "managed-kafka" / "external-secrets.yaml": dump(
            managed_kafka_external_secrets(),
            "deploy/k8s/generate.py (components/managed-kafka's users, local_stack.kafka_auth)"),
        KEDA_MANAGED_COMPONENT / "kustomization.yaml": component(
            KEDA_MANAGED_HEADER, [], keda_managed_kafka_patches()),
    }


# What the Prometheus Operator reads (components/monitoring, optional: an installation without the
# operator leaves it out): the services' ServiceMonitors and the PrometheusRule, generated here,
# and the operators' PodMonitors, written by hand beside them.
MONITORING_COMPONENT = COMPONENTS_DIR / "monitoring"


def prometheus_rule() -> dict[str, Any]:
    groups = [group for rules in (ALERTS, CLUSTER_ALERTS)
              for group in yaml.safe_load(rules.read_text())["groups"]]
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "saga-alerts", "labels": {"app.kubernetes.io/part-of": PART_OF,
                                                           **MANAGED_BY}},
            "spec": {"groups": groups}}


def dump(objects: list[dict[str, Any]], source: str) -> str:
    body = "---\n".join(yaml.safe_dump(o, sort_keys=False, width=100, allow_unicode=True)
                        for o in objects)
    return GENERATED + f"# Source: {source}\n" + body


def files() -> dict[Path, str]:
    out = {BASE / "services" / f"{service}.yaml":
           dump(service_objects(service, port),
                "deploy/k8s/generate.py, local_stack.settings (ports, partitions)")
           for service, port in DEFAULT_SERVICE_PORTS.items()}
    out[BASE / "services" / f"{CONSOLE}.yaml"] = dump(
        console_objects(), "deploy/k8s/generate.py, local_stack.settings (ports)")
    out[BASE / "services" / f"{REGISTRY_NAME}.yaml"] = dump(
        registry_objects(), "deploy/k8s/generate.py, local_stack.settings (ports), "
        "local_stack.registry (roles), saga_contracts (the schemas' digest)")
    out[BASE / "auth" / "settings.yaml"] = dump([auth_settings()],
                                                "deploy/k8s/generate.py, local_stack.identity")
    out |= component_files()
    out[MONITORING_COMPONENT / "service-monitors.yaml"] = dump(
        [service_monitor(service) for service in DEFAULT_SERVICE_PORTS],
        "deploy/k8s/generate.py, local_stack.settings (ports)")
    out[MONITORING_COMPONENT / "prometheus-rule.yaml"] = dump(
        [prometheus_rule()], "deploy/prometheus/alerts.yml, deploy/prometheus/alerts.cluster.yml")
    out[KEDA_COMPONENT / "scaled-objects.yaml"] = dump(
        keda_objects(), "deploy/k8s/generate.py, local_stack.kafka_auth (groups, topics read)")
    return out


def stale() -> list[Path]:
    return [path for path, text in files().items()
            if not path.exists() or path.read_text() != text]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        out_of_date = stale()
        for path in out_of_date:
            print(f"{path.relative_to(ROOT)} is out of date: run `uv run {COMMAND}`")
        return 1 if out_of_date else 0
    for path, text in files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
