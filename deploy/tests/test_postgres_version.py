"""One PostgreSQL version, pinned once (``deploy/postgres-version``): the server the local stack
and the CI's fresh root run (Zonky's build from Maven Central, its SHA-256 pinned), the compose
image made from those same programs, the default upstream image of docker-compose.yml, and the
image CloudNativePG runs on Kubernetes, which the Cluster takes from an ImageCatalog by major
version. No other place names a version of its own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from compose_stack.images import IMAGES
from local_stack.postgres.binaries import (
    ARTIFACT_VERSION,
    JAR,
    POSTGRES_MAJOR,
    POSTGRES_VERSION,
    pinned_sha256,
)

ROOT = Path(__file__).resolve().parents[2]


def _postgres_objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "deploy/k8s/components/cloudnative-pg/cluster.yaml")
                                          .read_text()) if d]


def test_the_pin_is_a_minor_release() -> None:
    """PostgreSQL numbers its releases major.minor (since 10)."""
    assert re.fullmatch(r"1\d\.\d+", POSTGRES_VERSION), POSTGRES_VERSION
    assert POSTGRES_MAJOR >= 18


def test_the_local_server_is_the_pinned_version_with_its_checksum() -> None:
    assert ARTIFACT_VERSION == f"{POSTGRES_VERSION}.0"
    assert JAR.endswith(f"-{POSTGRES_VERSION}.0.jar")
    assert re.fullmatch(r"[0-9a-f]{64}", pinned_sha256())


def test_kubernetes_runs_the_pinned_version_from_an_image_catalog() -> None:
    objects = _postgres_objects()
    [catalog] = [o for o in objects if o["kind"] == "ImageCatalog"]
    [cluster] = [o for o in objects if o["kind"] == "Cluster"]
    ref = cluster["spec"]["imageCatalogRef"]
    assert "imageName" not in cluster["spec"], "imageName and imageCatalogRef exclude each other"
    assert (ref["kind"], ref["name"], ref["major"]) == \
        ("ImageCatalog", catalog["metadata"]["name"], POSTGRES_MAJOR)
    images = {entry["major"]: entry["image"] for entry in catalog["spec"]["images"]}
    assert set(images) == {POSTGRES_MAJOR}
    # CloudNativePG's catalogs' names: <minor>[-<build timestamp>]-<type>-<debian>[@sha256:…].
    tag = re.fullmatch(r"ghcr\.io/cloudnative-pg/postgresql:(\d+\.\d+)(-\d{12})?-"
                       r"(minimal|standard|system)-(bookworm|trixie)(@sha256:[0-9a-f]{64})?",
                       images[POSTGRES_MAJOR])
    assert tag is not None, images[POSTGRES_MAJOR]
    assert tag.group(1) == POSTGRES_VERSION
    assert tag.group(5), f"{images[POSTGRES_MAJOR]} is not pinned by digest"


def test_compose_builds_and_defaults_to_the_pinned_version() -> None:
    assert IMAGES["postgres"][0].endswith(f"/postgres:{POSTGRES_VERSION}")
    images = set(re.findall(r"\bpostgres:(\d+\.\d+)\b", (ROOT / "docker-compose.yml").read_text()
                            + (ROOT / ".env.example").read_text()))
    assert images == {POSTGRES_VERSION}
    containerfile = (ROOT / "deploy/podman/postgres.Containerfile").read_text()
    assert "COPY server/" in containerfile, "the compose image runs the local stack's server"
    assert not re.search(r"postgresql-1\d(?!-)|postgresql-1\d\s", containerfile.replace(
        "postgresql-client-15", "")), "the compose image installs a Debian server package"


def test_no_other_place_pins_a_version_of_its_own() -> None:
    """An image, a Debian server package or a program path of a PostgreSQL version written
    anywhere but the pin and what is made from it goes stale on the next update."""
    pattern = re.compile(r"postgres(ql)?:1\d|postgresql-1\d(?!-)|/usr/lib/postgresql/\d")
    # The generator names CloudNativePG's image with its build and digest, which cannot be
    # derived from the pin: the catalog test above holds it to the pinned version.
    allowed = {"deploy/k8s/components/cloudnative-pg/cluster.yaml", "docker-compose.yml", ".env.example",
               "deploy/tests/test_postgres_version.py", "deploy/k8s/generate.py"}
    found = []
    for place in ("deploy", "tools", "docs", "README.md", "Makefile", "docker-compose.yml",
                  ".env.example"):
        path = ROOT / place
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            rel = file.relative_to(ROOT).as_posix()
            if rel in allowed or rel.startswith("deploy/k8s/schemas/") or "__pycache__" in rel:
                continue
            for n, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "PostgreSQL versions outside deploy/postgres-version:\n" + "\n".join(found)
