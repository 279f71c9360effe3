"""The stack's PostgreSQL passwords: generated once and kept, a password set in the environment
wins, readers never make one, and no service process receives another role's password."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_stack import parts, passwords, secrets


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    for name in ("PG_ADMIN_PASSWORD", "PEDIDOS_OWNER_PASSWORD", "PEDIDOS_APP_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "secrets"


def test_the_stack_makes_each_password_once_and_keeps_it(_scratch: Path) -> None:
    admin = passwords.admin_password()
    owner = passwords.role_password("pedidos", "owner")
    app = passwords.role_password("pedidos", "app")
    assert len({admin, owner, app}) == 3
    assert all(len(p) >= 32 for p in (admin, owner, app))
    assert passwords.admin_password() == admin
    assert passwords.role_password("pedidos", "owner") == owner
    assert (_scratch / "postgres-admin").read_text() == admin
    assert (_scratch / "pedidos-owner").read_text() == owner
    assert (_scratch / "pedidos-app").read_text() == app


def test_readers_never_make_a_password(_scratch: Path) -> None:
    assert passwords.known_admin_password() is None
    assert passwords.known_role_password("pagos", "app") is None
    assert not _scratch.exists() or not any(_scratch.iterdir())
    made = passwords.role_password("pagos", "app")
    assert passwords.known_role_password("pagos", "app") == made


def test_a_password_set_in_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    passwords.admin_password()
    monkeypatch.setenv("PG_ADMIN_PASSWORD", "chosen-by-a-person")
    monkeypatch.setenv("PEDIDOS_OWNER_PASSWORD", "also-chosen")
    assert passwords.admin_password() == passwords.known_admin_password() == "chosen-by-a-person"
    assert passwords.role_password("pedidos", "owner") == "also-chosen"
    assert passwords.known_role_password("pedidos", "owner") == "also-chosen"


def test_only_owner_and_app_roles_have_passwords() -> None:
    with pytest.raises(ValueError):
        passwords.role_password("pedidos", "admin")


def test_a_service_runs_with_its_app_role_and_no_other_password(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PG_ADMIN_PASSWORD", "admin-pw")
    monkeypatch.setenv("PEDIDOS_OWNER_PASSWORD", "owner-pw")
    monkeypatch.setenv("PEDIDOS_APP_PASSWORD", "app-pw")
    monkeypatch.setenv("PAGOS_GATEWAY_TIMEOUT_S", "2")  # an ordinary setting still reaches it
    env = {**parts.inherited_env(), **parts.service_env("pedidos")}
    assert "//pedidos_app:app-pw@" in env["DATABASE_URL"]
    assert env["PAGOS_GATEWAY_TIMEOUT_S"] == "2"
    leaked = [k for k, v in env.items() if any(p in v for p in ("admin-pw", "owner-pw"))]
    assert leaked == []
    assert not {"PG_ADMIN_PASSWORD", "PEDIDOS_OWNER_PASSWORD", "PEDIDOS_APP_PASSWORD"} & set(env)
