"""Every test of the local stack keeps the secrets it makes (a Kafka password, a CA) in a folder
of its own, never in the checkout's ``.local/secrets`` that a running stack uses. The tests of
the artifacts fetched from Maven pin their own (``pin_artifact``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from local_stack import secrets


@pytest.fixture(autouse=True)
def _secrets_of_the_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")


class FakeMaven:
    """Stands in for ``mvn dependency:copy``: writes ``served`` where Maven would put the
    artifact ``name``, and counts its calls."""

    def __init__(self, name: str, served: bytes) -> None:
        self.name, self.served, self.calls = name, served, 0

    def __call__(self, into: Path) -> Path:
        self.calls += 1
        (into / self.name).write_bytes(self.served)
        return into / self.name


PinArtifact = Callable[[ModuleType, str, bytes], FakeMaven]


@pytest.fixture
def pin_artifact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PinArtifact:
    """``pin_artifact(module, name, content)``: pins ``content``'s SHA-256 for the artifact
    ``name`` in the checksums file of ``module`` (a module that fetches a pinned artifact from
    Maven: its ``CHECKSUMS`` and ``_fetch``) and has Maven serve ``content``; pinning again
    replaces the pin, as a new version's would."""

    def pin(module: ModuleType, name: str, content: bytes) -> FakeMaven:
        sums = tmp_path / "pinned.sha256"
        sums.write_text(f"{hashlib.sha256(content).hexdigest()}  {name}\n")
        monkeypatch.setattr(module, "CHECKSUMS", sums)
        maven = FakeMaven(name, content)
        monkeypatch.setattr(module, "_fetch", maven)
        return maven

    return pin
