"""The Kubernetes manifests as `make manifests` renders them, for deploy/tests/test_k8s_*.py:
kustomize is the one deploy/k8s/kustomize.sh pins (make bootstrap builds it); without it the
tests fail, as every test of a program make bootstrap installs does."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = ROOT / "deploy" / "k8s" / "overlays"
KUSTOMIZE = ROOT / ".local" / "bin" / "kustomize"


def render(overlay: str) -> list[dict[str, Any]]:
    return render_directory(OVERLAYS / overlay)


def render_directory(kustomization: Path) -> list[dict[str, Any]]:
    assert KUSTOMIZE.exists(), ("kustomize is missing: `make bootstrap` builds it into "
                                ".local/bin (deploy/k8s/kustomize.sh)")
    done = subprocess.run([str(KUSTOMIZE), "build", str(kustomization)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="session")
def kustomize_build() -> Callable[[Path], list[dict[str, Any]]]:
    """``kustomize build`` of a folder, as the tests' own kustomizations need."""
    return render_directory


@pytest.fixture(scope="session")
def default_overlay() -> list[dict[str, Any]]:
    return render("default")


@pytest.fixture(scope="session")
def base_alone() -> list[dict[str, Any]]:
    """The base with no overlay or component: what every installation has."""
    return render_directory(OVERLAYS.parent / "base")


@pytest.fixture(scope="session")
def managed_overlay() -> list[dict[str, Any]]:
    return render("managed")


def render_with(overlay: str, components: list[str], workdir: Path) -> list[dict[str, Any]]:
    """An overlay with optional components added, as a kustomization of the user's would."""
    root = OVERLAYS.parent

    def relative(path: Path) -> str:
        # kustomize takes no absolute path.
        return os.path.relpath(path, workdir)
    (workdir / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [relative(OVERLAYS / overlay)],
        "components": [relative(root / "components" / c) for c in components]}))
    return render_directory(workdir)


# The optional components no overlay of the repository includes, each rendered on the overlays it
# is meant for: on a managed Kafka, its users' Secrets from the secret manager and KEDA signed in
# to it.
OPTIONAL_COMPONENTS = {
    "default": ["gateway-api", "external-secrets"],
    "managed": ["gateway-api", "external-secrets", "external-secrets/managed-kafka",
                "keda-workers", "keda-managed-kafka"],
}


@pytest.fixture(scope="session")
def with_optional_components(tmp_path_factory: pytest.TempPathFactory,
                             ) -> dict[str, list[dict[str, Any]]]:
    return {overlay: render_with(overlay, components,
                                 tmp_path_factory.mktemp(f"{overlay}-with-components"))
            for overlay, components in OPTIONAL_COMPONENTS.items()}


@pytest.fixture(scope="session")
def every_overlay() -> dict[str, list[dict[str, Any]]]:
    return {path.name: render(path.name) for path in sorted(OVERLAYS.iterdir())}
