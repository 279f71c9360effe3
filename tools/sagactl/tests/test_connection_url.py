"""Where sagactl connects: the URL it is given, or else, in a checkout, the local stack's admin
role with the password the stack generated; never a password of its own."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from local_stack import secrets
from local_stack.settings import PG_ADMIN
from sagactl import cli


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    monkeypatch.delenv("SAGACTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("PG_ADMIN_PASSWORD", raising=False)
    return tmp_path / "secrets"


def test_the_url_it_is_given_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets.password("postgres-admin")
    monkeypatch.setenv("SAGACTL_DATABASE_URL", "postgresql://operator@db.example/saga")
    assert cli._dsn() == "postgresql://operator@db.example/saga"


def test_in_a_checkout_it_uses_the_stacks_generated_admin_password() -> None:
    generated = secrets.password("postgres-admin")
    url = urlsplit(cli._dsn())
    assert (url.username, url.password, url.hostname) == (PG_ADMIN, generated, "127.0.0.1")


def test_without_a_url_or_a_generated_password_it_stops_and_says_why(_scratch: Path) -> None:
    with pytest.raises(SystemExit, match="SAGACTL_DATABASE_URL"):
        cli._dsn()
    assert not _scratch.exists() or not any(_scratch.iterdir())
