"""docker-compose.yml's images are built each once, one at a time (podman-compose would build an
image once per service that runs it, all at once), and a failed build names its image and shows
its own log."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from compose_stack import compose_file, images


def test_each_image_is_built_once_for_all_the_services_that_run_it() -> None:
    builds = compose_file.image_builds()
    names = [b.image for b in builds]
    assert len(names) == len(set(names))
    by_image = {b.image: b for b in builds}
    pagos = by_image["localhost/saga/pagos:0.1.0"]
    assert set(pagos.services) == {"pagos", "pagos-worker", "pagos-migrations"}
    assert dict(pagos.args)["SERVICE"] == "pagos"
    assert pagos.dockerfile.name == "service.Dockerfile" and pagos.dockerfile.exists()
    # Every service with a build section is covered by exactly one build.
    built = [s for name, s in compose_file.load()["services"].items() if "build" in s]
    assert sum(len(b.services) for b in builds) == len(built)


def test_the_images_follow_the_variables_as_compose_reads_them() -> None:
    builds = compose_file.image_builds({"SAGA_VERSION": "9.9.9",
                                        "PYTHON_IMAGE": "localhost/x/python:1"})
    for build in builds:
        assert build.image.endswith(":9.9.9")
        assert dict(build.args)["PYTHON_IMAGE"] == "localhost/x/python:1"
    # An empty value is unset, as docker compose reads ${NAME:-default}.
    assert all(b.image.endswith(":0.1.0") for b in compose_file.image_builds({"SAGA_VERSION": ""}))


def test_a_failed_build_names_its_image_and_prints_its_own_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "podman"
    fake.write_text("#!/bin/sh\necho 'STEP 3/9: RUN pip install'\n"
                    "echo 'error: no such package' >&2\nexit 7\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(images, "podman_binary", lambda: str(fake))
    monkeypatch.setattr(images, "environment", lambda extra=None: {"PATH": "/usr/bin:/bin"})
    monkeypatch.setattr(images, "STATE", tmp_path / "state")
    build = next(b for b in compose_file.image_builds()
                 if b.image.startswith("localhost/saga/pedidos"))
    with pytest.raises(SystemExit) as ended:
        images.build_service(build)
    assert "localhost/saga/pedidos:0.1.0" in str(ended.value) and "exit 7" in str(ended.value)
    log = tmp_path / "state" / "build-logs" / "localhost_saga_pedidos_0.1.0.log"
    assert str(log) in str(ended.value)
    assert "error: no such package" in log.read_text()
    assert "STEP 3/9" in capsys.readouterr().err


def test_missing_images_alone_are_built_unless_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    monkeypatch.setattr(images, "build_service", lambda b: built.append(b.image))
    monkeypatch.setattr(images, "image_exists", lambda name: name != "localhost/saga/pagos:0.1.0")
    images.build_services({}, force=False)
    assert built == ["localhost/saga/pagos:0.1.0"]
    built.clear()
    images.build_services({}, force=True)
    assert len(built) == len(compose_file.image_builds()) == len(set(built))
