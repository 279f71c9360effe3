"""Every test of the local stack keeps the secrets it makes (a Kafka password, a CA) in a folder
of its own, never in the checkout's ``.local/secrets`` that a running stack uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_stack import secrets


@pytest.fixture(autouse=True)
def _secrets_of_the_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
