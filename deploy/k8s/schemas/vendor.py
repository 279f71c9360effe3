"""Writes the JSON schemas deploy/tests validate the manifests and docker-compose.yml against,
from upstream files at the versions pinned below, and records each upstream file's sha256 in
SOURCES.json (deploy/k8s/schemas/README.md says why they are vendored, and how to refresh them).

    uv run python deploy/k8s/schemas/vendor.py \\
        --kubernetes-validate kubernetes_validate-1.37.0-py3-none-any.whl \\
        --strimzi <strimzi-kafka-operator checkout at 1.2.0> \\
        --cloudnative-pg <cloudnative-pg module or checkout at v1.30.0> \\
        --prometheus-operator <prometheus-operator checkout at v0.93.0> \\
        --compose-go <compose-go/v2 module at v2.16.2> \\
        --barman-cloud <plugin-barman-cloud checkout at v0.14.0>
    uv run python deploy/k8s/schemas/vendor.py keda --keda <kedacore/keda checkout at v2.20.2>
    uv run python deploy/k8s/schemas/vendor.py gateway-api \\
        --gateway-api <kubernetes-sigs/gateway-api checkout at v1.6.1>
    uv run python deploy/k8s/schemas/vendor.py external-secrets \\
        --external-secrets <external-secrets/external-secrets checkout at v2.9.0>

Any of the sources of the first command may be left out: what was vendored from it is then kept
as it is (to move one version without fetching the others). KEDA's definitions
(components/keda-workers, an optional component) go to a file of their own, crds-keda.json,
written by the second command alone; the Gateway API's HTTPRoute (components/gateway-api) to
crds-gateway-api.json, written by the third; External Secrets' ExternalSecret
(components/external-secrets) to crds-external-secrets.json, written by the fourth.

Only what the manifests use is kept (the kinds below and what they reference), without the
descriptions: the whole of them would weigh some 30 MB.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
KUBERNETES = "v1.33.0"
KUBERNETES_VALIDATE = "1.37.0"
STRIMZI = "1.2.0"
CLOUDNATIVE_PG = "v1.30.0"
PROMETHEUS_OPERATOR = "v0.93.0"
COMPOSE_GO = "v2.16.2"
KEDA = "v2.20.2"
GATEWAY_API = "v1.6.1"
EXTERNAL_SECRETS = "v2.9.0"
BARMAN_CLOUD = "v0.14.0"

# apiVersion/kind -> the definition in Kubernetes' OpenAPI document.
KINDS = {
    "v1/Namespace": "io.k8s.api.core.v1.Namespace",
    "v1/ConfigMap": "io.k8s.api.core.v1.ConfigMap",
    "v1/Secret": "io.k8s.api.core.v1.Secret",
    "v1/Service": "io.k8s.api.core.v1.Service",
    "v1/ServiceAccount": "io.k8s.api.core.v1.ServiceAccount",
    "apps/v1/Deployment": "io.k8s.api.apps.v1.Deployment",
    "batch/v1/Job": "io.k8s.api.batch.v1.Job",
    "policy/v1/PodDisruptionBudget": "io.k8s.api.policy.v1.PodDisruptionBudget",
    "autoscaling/v2/HorizontalPodAutoscaler":
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
    "networking.k8s.io/v1/NetworkPolicy": "io.k8s.api.networking.v1.NetworkPolicy",
}
# (option, version, file inside it) of each custom resource definition used.
CRDS = [
    ("strimzi", STRIMZI, "packaging/install/cluster-operator/040-Crd-kafka.yaml"),
    ("strimzi", STRIMZI, "packaging/install/cluster-operator/043-Crd-kafkatopic.yaml"),
    ("strimzi", STRIMZI, "packaging/install/cluster-operator/044-Crd-kafkauser.yaml"),
    ("strimzi", STRIMZI, "packaging/install/cluster-operator/045-Crd-kafkanodepool.yaml"),
    ("cloudnative_pg", CLOUDNATIVE_PG, "config/crd/bases/postgresql.cnpg.io_clusters.yaml"),
    ("cloudnative_pg", CLOUDNATIVE_PG,
     "config/crd/bases/postgresql.cnpg.io_scheduledbackups.yaml"),
    # The Barman Cloud plugin's object store (components/backups).
    ("barman_cloud", BARMAN_CLOUD, "config/crd/bases/barmancloud.cnpg.io_objectstores.yaml"),
    ("cloudnative_pg", CLOUDNATIVE_PG, "config/crd/bases/postgresql.cnpg.io_imagecatalogs.yaml"),
    ("prometheus_operator", PROMETHEUS_OPERATOR,
     "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"),
    ("prometheus_operator", PROMETHEUS_OPERATOR,
     "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"),
    ("prometheus_operator", PROMETHEUS_OPERATOR,
     "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml"),
]
COMPOSE_SPEC = "schema/compose-spec.json"
KEDA_CRDS = ["config/crd/bases/keda.sh_scaledobjects.yaml",
             "config/crd/bases/keda.sh_triggerauthentications.yaml"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[1]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items()
                if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


def kubernetes_bundle(wheel: Path) -> tuple[dict[str, Any], bytes]:
    """One schema whose ``$defs`` are the kinds above and all they reference (the strict
    variant: an unknown field is an error, as ``kubectl apply`` makes it)."""
    name = f"kubernetes_validate/kubernetes-json-schema/{KUBERNETES}-local-strict/_definitions.json"
    with zipfile.ZipFile(wheel) as archive:
        raw = archive.read(name)
    defs = json.loads(raw)["$defs"]
    keep: set[str] = set()
    todo = set(KINDS.values())
    while todo:
        name = todo.pop()
        keep.add(name)
        todo |= _refs(defs[name]) - keep
    bundle = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "$defs": {k: _without_descriptions(defs[k]) for k in sorted(keep)},
              "kinds": {kind: {"$ref": f"#/$defs/{name}"} for kind, name in KINDS.items()}}
    return bundle, raw


def _strict(node: Any) -> Any:
    """An OpenAPI v3 schema of a CRD as JSON Schema: ``nullable`` allows null, and an object
    with declared properties refuses others (what the API server's strict field validation
    does) unless it keeps unknown fields."""
    if isinstance(node, list):
        return [_strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items()
           if not (k == "description" and isinstance(v, str)) and k != "nullable"}
    if node.get("nullable") and isinstance(node.get("type"), str):
        out["type"] = [node["type"], "null"]
    if ("properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def crd_schemas(path: Path) -> dict[str, dict[str, Any]]:
    crd = yaml.safe_load(path.read_text())
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    out = {}
    for version in crd["spec"]["versions"]:
        if not version.get("served"):
            continue
        schema = _strict(version["schema"]["openAPIV3Schema"])
        # What the API server checks of every object's metadata; the CRD says only "object".
        schema["properties"]["metadata"] = {"type": "object"}
        schema["$schema"] = "http://json-schema.org/draft-07/schema#"
        out[f"{group}/{version['name']}/{kind}"] = schema
    return out


# The standard channel's HTTPRoute (components/gateway-api).
GATEWAY_API_CRDS = ["config/crd/standard/gateway.networking.k8s.io_httproutes.yaml"]
# The ExternalSecret (components/external-secrets).
EXTERNAL_SECRETS_CRDS = ["config/crds/bases/external-secrets.io_externalsecrets.yaml"]


def optional_main(name: str, version: str, files: list[str], argv: list[str]) -> None:
    """The definitions of an optional component's kinds, in crds-<name>.json."""
    parser = argparse.ArgumentParser(description=f"{name}'s custom resource definitions")
    parser.add_argument(f"--{name}", type=Path, required=True)
    args = parser.parse_args(argv)
    checkout: Path = getattr(args, name.replace("-", "_"))
    sources_file = HERE / "SOURCES.json"
    sources: dict[str, dict[str, str]] = json.loads(sources_file.read_text())
    crds: dict[str, Any] = {}
    for file in files:
        path = checkout / file
        crds |= crd_schemas(path)
        sources[f"crds-{name}.json: {path.name}"] = {"from": f"{name} {version}: {file}",
                                                     "sha256": sha256(path.read_bytes())}
    (HERE / f"crds-{name}.json").write_text(json.dumps(crds, sort_keys=True))
    sources_file.write_text(json.dumps(sources, indent=2, sort_keys=True) + "\n")


def main() -> None:
    if sys.argv[1:2] == ["keda"]:
        optional_main("keda", KEDA, KEDA_CRDS, sys.argv[2:])
        return
    if sys.argv[1:2] == ["gateway-api"]:
        optional_main("gateway-api", GATEWAY_API, GATEWAY_API_CRDS, sys.argv[2:])
        return
    if sys.argv[1:2] == ["external-secrets"]:
        optional_main("external-secrets", EXTERNAL_SECRETS, EXTERNAL_SECRETS_CRDS, sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubernetes-validate", type=Path)
    for option in ("strimzi", "cloudnative-pg", "prometheus-operator", "compose-go",
                   "barman-cloud"):
        parser.add_argument(f"--{option}", type=Path)
    args = parser.parse_args()

    sources: dict[str, dict[str, str]] = json.loads((HERE / "SOURCES.json").read_text())
    if args.kubernetes_validate:
        bundle, raw = kubernetes_bundle(args.kubernetes_validate)
        (HERE / f"kubernetes-{KUBERNETES}.json").write_text(json.dumps(bundle, sort_keys=True))
        sources[f"kubernetes-{KUBERNETES}.json"] = {
            "from": f"PyPI kubernetes-validate {KUBERNETES_VALIDATE}: kubernetes-json-schema/"
                    f"{KUBERNETES}-local-strict/_definitions.json", "sha256": sha256(raw)}

    crds: dict[str, Any] = json.loads((HERE / "crds.json").read_text())
    for option, version, file in CRDS:
        if getattr(args, option) is None:
            continue
        path = getattr(args, option) / file
        crds |= crd_schemas(path)
        sources[f"crds.json: {path.name}"] = {"from": f"{option.replace('_', '-')} {version}: "
                                              f"{file}", "sha256": sha256(path.read_bytes())}
    (HERE / "crds.json").write_text(json.dumps(crds, sort_keys=True))

    if args.strimzi:
        # The Kafka versions the Strimzi release runs, as released
        # (deploy/tests/test_kafka_version.py).
        versions = args.strimzi / "kafka-versions.yaml"
        (HERE / "strimzi-kafka-versions.yaml").write_bytes(versions.read_bytes())
        sources["strimzi-kafka-versions.yaml"] = {
            "from": f"strimzi {STRIMZI}: kafka-versions.yaml",
            "sha256": sha256(versions.read_bytes())}

    if args.compose_go:
        compose = args.compose_go / COMPOSE_SPEC
        (HERE / "compose-spec.json").write_bytes(compose.read_bytes())
        sources["compose-spec.json"] = {
            "from": f"Go module github.com/compose-spec/compose-go/v2 {COMPOSE_GO}: "
                    f"{COMPOSE_SPEC}", "sha256": sha256(compose.read_bytes())}
    (HERE / "SOURCES.json").write_text(json.dumps(sources, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
