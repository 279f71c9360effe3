"""The local stack's generated secrets: made once, private to their owner, stable afterwards."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from local_stack import secrets


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    return tmp_path / "secrets"


def test_a_password_is_made_once_and_read_back(_scratch: Path) -> None:
    first = secrets.password("kafka-pedidos")
    assert len(first) >= 32
    assert secrets.password("kafka-pedidos") == first
    assert secrets.password("kafka-pagos") != first
    assert secrets.existing("kafka-pedidos") == first


def test_secrets_are_readable_by_their_owner_only(_scratch: Path) -> None:
    _scratch.mkdir(mode=0o755)
    secrets.password("postgres-admin")
    assert stat.S_IMODE(_scratch.stat().st_mode) == 0o700
    assert stat.S_IMODE((_scratch / "postgres-admin").stat().st_mode) == 0o600


def test_a_secret_never_made_is_not_made_by_reading_it() -> None:
    assert secrets.existing("gateway-secret-key") is None


@pytest.mark.parametrize("name", ["../x", "A", "", "a/b", "x" * 65])
def test_names_cannot_leave_the_directory(name: str) -> None:
    with pytest.raises(ValueError):
        secrets.path_of(name)
