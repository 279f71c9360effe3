"""The schema registry's application (local_stack.registry.app) comes the way PostgreSQL's
server does (local_stack.maven_artifacts): an archive other than the pinned one is never
unpacked, the pinned one is unpacked once and not fetched again."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

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


def test_an_archive_other_than_the_pinned_one_is_not_unpacked(
        tmp_path: Path, pin_artifact: Any) -> None:
    maven = pin_artifact(app, app.ARCHIVE, _archive({app.RUNNER: b"pinned"}))
    maven.served = _archive({app.RUNNER: b"something else"})
    with pytest.raises(SystemExit, match="SHA-256"):
        app.app_home(tmp_path / "apicurio")
    assert not (tmp_path / "apicurio").exists()


def test_the_pinned_archive_is_unpacked_once(tmp_path: Path,
                                             pin_artifact: Any) -> None:
    maven = pin_artifact(app, app.ARCHIVE, _archive({app.RUNNER: b"jar", "lib/main/a.jar": b"a"}))
    home = app.app_home(tmp_path / "apicurio")
    assert app.app_home(tmp_path / "apicurio") == home
    assert maven.calls == 1
    assert (home / app.RUNNER).read_bytes() == b"jar"


def test_an_archive_without_the_runner_is_refused(tmp_path: Path,
                                                  pin_artifact: Any) -> None:
    pin_artifact(app, app.ARCHIVE, _archive({"lib/main/a.jar": b"a"}))
    with pytest.raises(SystemExit, match=app.RUNNER):
        app.app_home(tmp_path / "apicurio")
