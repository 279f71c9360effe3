"""An archive from Maven Central at a pinned version, used only when its SHA-256 is the one the
repository pins: PostgreSQL's server (``local_stack.postgres.binaries``) and the schema
registry's application (``local_stack.registry.app``) both come this way.

Maven fetches it once per machine (its local repository; ``-C``: the repository's own checksum
must match), the SHA-256 is checked against a line ``<sha256>  <file name>`` of a checksums file
in the repository, and the archive is unpacked into a folder of its own, with a marker naming
the digest: the same pin is never fetched nor unpacked again, a new pin unpacks anew."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from local_stack.console import log


def pinned_sha256(checksums: Path, name: str, pinned_by: str) -> str:
    """The SHA-256 ``checksums`` pins for the file ``name``; ``pinned_by`` says which version
    file asked for it, for the message when there is none."""
    for line in checksums.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, listed = line.split()
            if listed == name:
                return digest
    raise SystemExit(f"[stack] {checksums} pins no SHA-256 for {name} ({pinned_by}): add its "
                     "line (sha256sum of the file Maven fetches)")


def sha256_of(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def maven_copy(coordinates: str, name: str, into: Path) -> Path:
    """``coordinates`` (group:artifact:version[:type:classifier]) through Maven, copied
    ``into``; the file Maven names ``name``."""
    subprocess.run(["mvn", "-q", "-B", "-C", "-Dstyle.color=never", "dependency:copy",
                    f"-Dartifact={coordinates}", f"-DoutputDirectory={into}"], check=True)
    return into / name


def unpacked_once(folder: Path, *, name: str, digest: str, checksums: Path, what: str,
                  fetch: Callable[[Path], Path], unpack: Callable[[Path, Path], None]) -> Path:
    """``folder`` holding the archive ``name`` unpacked: fetched (``fetch(into)`` returns its
    path), checked against ``digest`` and unpacked (``unpack(archive, into)``) unless the
    marker says this digest is there already. ``what`` names it in the log."""
    marker = folder / ".complete"
    if marker.exists() and marker.read_text() == digest:
        return folder
    log(f"fetching {what} from Maven Central (once)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}-") as tmp:
        archive = fetch(Path(tmp))
        found = sha256_of(archive)
        if found != digest:
            raise SystemExit(f"[stack] {name} from Maven has SHA-256 {found}, and "
                             f"{checksums} pins {digest}: not used")
        unpacked = Path(tmp) / "unpacked"
        unpack(archive, unpacked)
        shutil.rmtree(folder, ignore_errors=True)
        unpacked.rename(folder)
    marker.write_text(digest)
    return folder


def extract(tar: tarfile.TarFile, into: Path, name: str) -> None:
    """Every member of ``tar`` (from the archive ``name``) into ``into``, none outside it."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, filter="data")
    else:  # Debian 12's Python 3.11.2 predates extraction filters (3.11.4)
        refuse_escapes(tar, into, name)
        tar.extractall(into)


def refuse_escapes(tar: tarfile.TarFile, into: Path, name: str) -> None:
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
            raise SystemExit(f"[stack] {name}: {member.name} would land outside {into}")
