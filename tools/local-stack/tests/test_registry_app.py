"""The schema registry's application (local_stack.registry.app) comes the way PostgreSQL's
server does (local_stack.maven_artifacts): an archive other than the pinned one is never
unpacked, the pinned one is unpacked once and not fetched again."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from local_stack.registry import app


def _archive(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


class _Maven:
    def __init__(self, archive: bytes) -> None:
        self.archive, self.calls = archive, 0

    def __call__(self, into: Path) -> Path:
        self.calls += 1
        (into / app.ARCHIVE).write_bytes(self.archive)
        return into / app.ARCHIVE


def _pin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, archive: bytes) -> _Maven:
    sums = tmp_path / "app.sha256"
    sums.write_text(f"{hashlib.sha256(archive).hexdigest()}  {app.ARCHIVE}\n")
    monkeypatch.setattr(app, "CHECKSUMS", sums)
    maven = _Maven(archive)
    monkeypatch.setattr(app, "_fetch", maven)
    return maven


def test_an_archive_other_than_the_pinned_one_is_not_unpacked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    maven = _pin(monkeypatch, tmp_path, _archive({app.RUNNER: b"pinned"}))
    maven.archive = _archive({app.RUNNER: b"something else"})
    with pytest.raises(SystemExit, match="SHA-256"):
        app.app_home(tmp_path / "apicurio")
    assert not (tmp_path / "apicurio").exists()


def test_the_pinned_archive_is_unpacked_once(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    maven = _pin(monkeypatch, tmp_path, _archive({app.RUNNER: b"jar", "lib/main/a.jar": b"a"}))
    home = app.app_home(tmp_path / "apicurio")
    assert app.app_home(tmp_path / "apicurio") == home
    assert maven.calls == 1
    assert (home / app.RUNNER).read_bytes() == b"jar"


def test_an_archive_without_the_runner_is_refused(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _pin(monkeypatch, tmp_path, _archive({"lib/main/a.jar": b"a"}))
    with pytest.raises(SystemExit, match=app.RUNNER):
        app.app_home(tmp_path / "apicurio")
