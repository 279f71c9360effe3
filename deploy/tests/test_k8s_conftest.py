"""The rendered overlays pass the policies of deploy/k8s/policy under conftest (Open Policy
Agent), the policy tool `make bootstrap` builds (deploy/k8s/conftest.sh): registry-qualified
images, third-party images pinned by digest, probes and limits, a preStop pause where traffic is
served, migration Jobs named by their release that pods wait for, workers reached by Prometheus
alone, a required issuer with no placeholder. Each rule is shown to refuse a manifest that
breaks it."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFTEST = ROOT / ".local" / "bin" / "conftest"
POLICY = ROOT / "deploy" / "k8s" / "policy"
Objects = list[dict[str, Any]]


def conftest(objects: Objects) -> subprocess.CompletedProcess[str]:
    assert CONFTEST.exists(), ("conftest is missing: `make bootstrap` builds it into .local/bin "
                               "(deploy/k8s/conftest.sh)")
    return subprocess.run(
        [str(CONFTEST), "test", "--combine", "--no-color", "-p", str(POLICY), "-"],
        input=yaml.safe_dump_all(objects), capture_output=True, text=True, timeout=120)


@pytest.mark.external
def test_every_overlay_passes_the_policies(every_overlay: dict[str, Objects]) -> None:
    for overlay, objects in every_overlay.items():
        done = conftest(objects)
        assert done.returncode == 0, f"overlay {overlay}:\n{done.stdout}{done.stderr}"


@pytest.mark.external
def test_the_optional_components_pass_the_policies(
        with_optional_components: dict[str, Objects]) -> None:
    for overlay, objects in with_optional_components.items():
        done = conftest(objects)
        assert done.returncode == 0, f"overlay {overlay}:\n{done.stdout}{done.stderr}"


def _one(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def _pod(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = _one(objects, kind, name)["spec"]["template"]["spec"]
    return spec


def _main(objects: Objects, name: str) -> dict[str, Any]:
    container: dict[str, Any] = _pod(objects, "Deployment", name)["containers"][0]
    return container


def _job(objects: Objects) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Job"
                and o["metadata"]["labels"].get("app.kubernetes.io/component") == "migrations")


def _env_without_issuer(objects: Objects) -> None:
    container = _main(objects, "pedidos-worker")
    container["env"] = [e for e in container["env"] if e["name"] != "AUTH_ISSUER"]


VIOLATIONS: list[tuple[Callable[[Objects], Any], str]] = [
    (lambda o: _main(o, "pedidos-api").update(image="saga/pedidos:0.1.0"),
     "names no registry"),
    (lambda o: _main(o, "pedidos-api").update(image="registry.invalid/saga/pedidos:latest"),
     "is :latest"),
    (lambda o: _main(o, "pedidos-api").update(image="docker.io/library/busybox:1.36"),
     "third-party image docker.io/library/busybox:1.36 is not pinned by digest"),
    (lambda o: _one(o, "Cluster", "saga-db")["spec"].update(
        imageName="ghcr.io/cloudnative-pg/postgresql:standard-trixie"),
     "is not pinned by digest"),
    (lambda o: _main(o, "pagos-api").pop("readinessProbe"), "has no readinessProbe"),
    (lambda o: _main(o, "pagos-worker")["resources"].pop("limits"), "has no cpu limits"),
    (lambda o: _main(o, "inventario-api").pop("lifecycle"), "has no preStop pause"),
    (lambda o: _pod(o, "Deployment", "consola").update(terminationGracePeriodSeconds=5),
     "is not shorter than its grace period"),
    (lambda o: _job(o)["metadata"].update(name="pedidos-migrations"),
     "does not carry its image's tag"),
    (lambda o: _job(o)["spec"].update(ttlSecondsAfterFinished=600), "every GitOps sync"),
    (lambda o: _pod(o, "Deployment", "pagos-api").pop("initContainers"),
     "does not wait for its schema"),
    (lambda o: _one(o, "NetworkPolicy", "pagos-worker")["spec"].update(
        ingress=[{"ports": [{"protocol": "TCP", "port": 8003}]}]), "others than Prometheus"),
    (lambda o: o.remove(_one(o, "NetworkPolicy", "inventario-worker")),
     "Deployment inventario-worker: no NetworkPolicy of its own"),
    (lambda o: _one(o, "ConfigMap", "saga-auth-settings")["data"].update(
        AUTH_ISSUER="https://issuer.example.com"), "is a placeholder"),
    (_env_without_issuer, "does not require AUTH_ISSUER"),
]


@pytest.mark.external
@pytest.mark.parametrize(("plant", "expected"), VIOLATIONS,
                         ids=[expected for _, expected in VIOLATIONS])
def test_conftest_refuses_a_planted_violation(
        default_overlay: Objects, plant: Callable[[Objects], Any], expected: str) -> None:
    objects = copy.deepcopy(default_overlay)
    plant(objects)
    done = conftest(objects)
    assert done.returncode != 0, done.stdout
    assert expected in done.stdout, done.stdout
