"""Writes the parts of the Kubernetes base (deploy/k8s/base) that follow from the code and the
local stack, so that the three deployments cannot drift apart:

    uv run python deploy/k8s/generate.py            # rewrites the generated files
    uv run python deploy/k8s/generate.py --check    # exit 1 if one is out of date

- per service (services/<name>.yaml): its settings, its API and worker Deployments (the
  ``RUN_*`` switches), its migration Job (the only object given the schema owner's password),
  Services, PodDisruptionBudgets, HorizontalPodAutoscalers stopped at the topics' partition
  count, NetworkPolicy and ServiceMonitor, all on the local stack's port;
- the issuer every service trusts (auth/settings.yaml: a placeholder for the OIDC issuer,
  the local stack's audience);
- the operator console (services/consola.yaml): its settings, Deployment, Service,
  PodDisruptionBudget and NetworkPolicy, on the local stack's port;
- the Kafka topics (saga_contracts.topics) and users, whose ACLs are the local stack's
  (local_stack.kafka_auth.acls);
- the PostgreSQL cluster's roles, the local stack's (an owner and an app role per service);
- the PrometheusRule, whose groups are deploy/prometheus/alerts.yml's and alerts.cluster.yml's.

What is written once and read by people (the Kafka cluster, kustomizations, overlays, the
components) is not generated. deploy/tests/test_k8s_generated.py fails when a generated file
differs from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from local_stack import identity, kafka_auth
from local_stack.passwords import READERS, reader_role
from local_stack.settings import (
    DEFAULT_CONSOLA_PORT,
    DEFAULT_SERVICE_PORTS,
    METRICS_PORT_OFFSET,
    PG_DB,
)
from saga_contracts import topics
from sagakit.kafka_topics import DEFAULT_TOPIC_PARTITIONS

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s" / "base"
COMMAND = "python deploy/k8s/generate.py"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
# Alerts on what only a cluster scrapes (Kafka's and CloudNativePG's exporters).
CLUSTER_ALERTS = ROOT / "deploy" / "prometheus" / "alerts.cluster.yml"

# The images are named like this; an overlay gives them a registry and a tag (`images:`).
IMAGE_TAG = "0.1.0"
KAFKA_CLUSTER = "saga-kafka"
# Strimzi's bootstrap Service and the TLS listener of kafka/kafka.yaml (SCRAM over TLS).
KAFKA_BOOTSTRAP = f"{KAFKA_CLUSTER}-kafka-bootstrap:9093"
KAFKA_CA_SECRET = f"{KAFKA_CLUSTER}-cluster-ca-cert"
DB_CLUSTER = "saga-db"
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
# Whose bearer tokens every service believes: one ConfigMap for all, its issuer a placeholder
# that an overlay sets (the local identity provider is a development stand-in,
# components/identity-provider); the audience is the one the local stack's tokens name.
AUTH_SETTINGS = "saga-auth-settings"
AUTH_ISSUER = "https://issuer.example.com"
# The operator console's address as the operators' browsers reach it (an Ingress of the
# installer's, in front of its Service), a placeholder an overlay sets; and the Secret that holds
# the key its session cookies are signed with, made by whoever installs (docs/deploy.md).
CONSOLE = "consola"
CONSOLE_PUBLIC_URL = "https://console.example.com"
CONSOLE_SESSION_SECRET = ("consola-session-secret", "secret")

# Prometheus scrapes each pod's metrics-only port (METRICS_PORT, no token: nothing to expire,
# nothing an operator could do with it), which the pod's NetworkPolicy opens to the Prometheus
# pods of the monitoring namespace and to nobody else. An overlay whose Prometheus runs
# elsewhere patches these selectors (docs/deploy.md).
METRICS_PORT_NAME = "metrics"
MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}

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
    return f"saga/{service}:{IMAGE_TAG}"


def metrics_port(port: int) -> int:
    """The metrics-only port, the local stack's (local_stack.settings.metrics_port)."""
    return port + METRICS_PORT_OFFSET


def config_map(service: str, port: int) -> dict[str, Any]:
    data = {"SERVICE_NAME": service, "HTTP_HOST": "0.0.0.0", "HTTP_PORT": str(port),
            "METRICS_HOST": "0.0.0.0", "METRICS_PORT": str(metrics_port(port)),
            "DB_POOL_SIZE": str(DB_POOL_SIZE), "LOG_LEVEL": "INFO",
            "KAFKA_BOOTSTRAP_SERVERS": KAFKA_BOOTSTRAP, "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKA_SASL_MECHANISM": kafka_auth.MECHANISM, "KAFKA_SASL_USERNAME": service,
            "KAFKA_SSL_CAFILE": "/etc/saga/kafka-ca/ca.crt",
            **SERVICE_SETTINGS.get(service, {})}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{service}-settings", "labels": labels(service)}, "data": data}


def volumes_and_mounts(service: str, component: str) -> tuple[list[dict[str, Any]],
                                                              list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    if component == "worker":
        volumes.append({"name": "kafka-ca", "secret": {
            "secretName": KAFKA_CA_SECRET, "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
        mounts.append({"name": "kafka-ca", "mountPath": "/etc/saga/kafka-ca", "readOnly": True})
    if holds_token_keys(service, component):
        _, secret, key = TOKEN_KEYS[service]
        volumes.append({"name": "payment-token", "secret": {
            "secretName": secret, "items": [{"key": key, "path": key}]}})
        mounts.append({"name": "payment-token", "mountPath": "/etc/saga/payment-token",
                       "readOnly": True})
    return volumes, mounts


def container_env(service: str, component: str) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in COMPONENTS[component].items()]
    env += database_env(service, "app")
    if component == "worker":
        env.append({"name": "KAFKA_SASL_PASSWORD", "valueFrom": {"secretKeyRef": {
            # The Secret Strimzi's user operator makes for the KafkaUser of that name.
            "name": service, "key": "password"}}})
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
    # Required where consumers run (the worker, which refuses to start them without a key):
    # only a replay the operator signed is believed (docs/deploy.md).
    env.append({"name": "SAGA_OPERATOR_PUBLIC_KEYS", "valueFrom": {"configMapKeyRef": {
        "name": "saga-operator-public-keys", "key": "keys",
        "optional": component != "worker"}}})
    return env


def probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period,
            "timeoutSeconds": 3, "failureThreshold": failures}


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
        # /health: the process answers; /ready: its database (and, in the worker, Kafka).
        "startupProbe": probe("/health", 2, 30),
        "livenessProbe": probe("/health", 10, 3),
        "readinessProbe": probe("/ready", 5, 2),
        "resources": resources("1", "512Mi"),
        "securityContext": security_context(),
        "volumeMounts": mounts,
    }
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
                    # Longer than the worker's stop: it finishes its gateway calls first.
                    "terminationGracePeriodSeconds": 30,
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": labels(service, component)}}],
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def migration_job(service: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"{service}-migrations", "labels": labels(service, "migrations")},
        "spec": {
            "backoffLimit": 6,
            # Gone after a while, so that the next `kubectl apply` makes it again and runs the
            # new image's migrations (a Job's template cannot be changed in place).
            "ttlSecondsAfterFinished": 600,
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
                        # The schema owner's password: here, and in no Deployment.
                        "env": database_env(service, "owner"),
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


def prometheus_ingress(port: int) -> dict[str, Any]:
    """The metrics-only port, from the monitoring namespace's Prometheus pods only."""
    return {"from": [{"namespaceSelector": {"matchLabels": {
                          "kubernetes.io/metadata.name": MONITORING_NAMESPACE}},
                      "podSelector": {"matchLabels": PROMETHEUS_POD_LABELS}}],
            "ports": [{"protocol": "TCP", "port": metrics_port(port)}]}


def network_policies(service: str, port: int) -> list[dict[str, Any]]:
    """Who a service's pods may reach: DNS and its database always, the issuer (and pagos'
    gateway) over HTTPS from the API and the worker, Kafka from the worker; and who may reach
    them: anyone on their HTTP port, Prometheus alone on their metrics port."""
    def policy(component: str, egress: list[dict[str, Any]], ingress: bool) -> dict[str, Any]:
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": f"{service}-{component}",
                             "labels": labels(service, component)},
                "spec": {"podSelector": {"matchLabels": labels(service, component)},
                         "policyTypes": ["Ingress", "Egress"],
                         "ingress": [{"ports": [{"protocol": "TCP", "port": port}]},
                                     prometheus_ingress(port)]
                         if ingress else [],
                         "egress": egress}}
    return [policy("api", [dns_egress(), database_egress(), https_egress()], True),
            policy("worker", [dns_egress(), database_egress(), kafka_egress(), https_egress()],
                   True),
            policy("migrations", [dns_egress(), database_egress()], False)]


def service_monitor(service: str) -> dict[str, Any]:
    """Both Services of the service (API and worker), on their metrics-only port, with no
    token. The operator labels each target with the Kubernetes Service's name as ``service``
    (``pedidos`` or ``pedidos-worker``), which would push the metrics' own ``service`` label
    aside (``exported_service``) and split every ``by (service)`` in two: the samples' own
    labels are kept (``honorLabels``), the target's ``service`` is the service's name (for the
    metrics that carry none), and so is its ``job``."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": {"name": service, "labels": labels(service)},
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
            *network_policies(service, port), service_monitor(service)]


def console_objects(port: int = DEFAULT_CONSOLA_PORT) -> list[dict[str, Any]]:
    """The operator console: stateless (its session is a signed cookie, the sign-in's state
    too), so two replicas behind one Service; it holds no credential but its cookie key and
    ``console_reader``'s password (the services' published views, nothing else), and reaches
    only the issuer (HTTPS), the database and the services' APIs, with the operators' own
    tokens."""
    component = "web"
    settings = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"{CONSOLE}-settings", "labels": labels(CONSOLE)},
                "data": {"CONSOLA_HOST": "0.0.0.0", "CONSOLA_PORT": str(port),
                         "CONSOLA_PUBLIC_URL": CONSOLE_PUBLIC_URL,
                         "CONSOLA_SECURE_COOKIE": "true",
                         "CONSOLA_PEDIDOS_URL": f"http://pedidos:{DEFAULT_SERVICE_PORTS['pedidos']}",
                         "CONSOLA_PAGOS_URL": f"http://pagos:{DEFAULT_SERVICE_PORTS['pagos']}",
                         "CONSOLA_INVENTARIO_URL":
                             f"http://inventario:{DEFAULT_SERVICE_PORTS['inventario']}"}}
    secret_name, secret_key = CONSOLE_SESSION_SECRET
    container = {
        "name": CONSOLE, "image": image(CONSOLE), "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "envFrom": [{"configMapRef": {"name": f"{CONSOLE}-settings"}},
                    {"configMapRef": {"name": AUTH_SETTINGS}}],
        "env": [{"name": "CONSOLA_SESSION_SECRET",
                 "valueFrom": {"secretKeyRef": {"name": secret_name, "key": secret_key}}},
                # console_reader's URL, put together by Kubernetes from its role's Secret.
                {"name": "CONSOLA_DATABASE_PASSWORD",
                 "valueFrom": {"secretKeyRef": {"name": reader_secret("console"),
                                                "key": "password"}}},
                {"name": "CONSOLA_DATABASE_URL",
                 "value": f"postgresql://{reader_role('console')}:$(CONSOLA_DATABASE_PASSWORD)"
                          f"@{DB_HOST}:5432/{PG_DB}"}],
        "startupProbe": probe("/health", 2, 30),
        "livenessProbe": probe("/health", 10, 3),
        "readinessProbe": probe("/health", 5, 2),
        "resources": resources("500m", "256Mi"),
        "securityContext": security_context(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
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
                       "egress": [dns_egress(), https_egress(), database_egress(), *apis]}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": CONSOLE, "labels": labels(CONSOLE)},
               "automountServiceAccountToken": False}
    return [account, settings, deployment, service,
            disruption_budget(CONSOLE, component), policy]


def auth_settings() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": AUTH_SETTINGS, "labels": {"app.kubernetes.io/part-of": PART_OF}},
            "data": {"AUTH_ISSUER": AUTH_ISSUER, "AUTH_AUDIENCE": identity.AUDIENCE}}


def kafka_topics() -> list[dict[str, Any]]:
    return [{"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
             "metadata": {"name": topic, "labels": {"strimzi.io/cluster": KAFKA_CLUSTER}},
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
                        "strimzi.io/cluster": KAFKA_CLUSTER, **labels(service)}},
                    "spec": {"authentication": {"type": "scram-sha-512"},
                             "authorization": {"type": "simple", "acls": acls}}})
    return out


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
              for consumer in READERS)]


def max_connections() -> int:
    """Every autoscaler at its maximum, each process with its pool and its leader lock, the
    migration Jobs, and room for an operator and CloudNativePG's own connections."""
    processes = len(DEFAULT_SERVICE_PORTS) * len(COMPONENTS) * DEFAULT_TOPIC_PARTITIONS
    return processes * (DB_POOL_SIZE + 1) + len(DEFAULT_SERVICE_PORTS) * 2 + 50


def database_cluster() -> dict[str, Any]:
    return {
        "apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
        "metadata": {"name": DB_CLUSTER, "labels": {"app.kubernetes.io/part-of": PART_OF}},
        "spec": {
            "instances": 3,
            "imageName": "ghcr.io/cloudnative-pg/postgresql:17.5",
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


def prometheus_rule() -> dict[str, Any]:
    groups = [group for rules in (ALERTS, CLUSTER_ALERTS)
              for group in yaml.safe_load(rules.read_text())["groups"]]
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "saga-alerts", "labels": {"app.kubernetes.io/part-of": PART_OF}},
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
    out[BASE / "auth" / "settings.yaml"] = dump([auth_settings()],
                                                "deploy/k8s/generate.py, local_stack.identity")
    out[BASE / "kafka" / "topics.yaml"] = dump(kafka_topics(), "saga_contracts.topics")
    out[BASE / "kafka" / "users.yaml"] = dump(kafka_users(), "local_stack.kafka_auth.acls()")
    out[BASE / "postgres" / "cluster.yaml"] = dump([database_cluster()],
                                                   "local_stack (roles), deploy/k8s/generate.py")
    out[BASE / "monitoring" / "prometheus-rule.yaml"] = dump(
        [prometheus_rule()], "deploy/prometheus/alerts.yml, deploy/prometheus/alerts.cluster.yml")
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
