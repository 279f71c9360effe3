"""The schema registry's settings as the stack writes them, and its start refused, with the port
named, when another program holds its port (before anything is fetched or spawned)."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from local_stack import secrets
from local_stack.registry import principals, server


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    for name in ("REGISTRY_DEPLOYER_PASSWORD", "REGISTRY_READER_PASSWORD",
                 "REGISTRY_OWNER_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def test_its_settings_hold_digests_of_the_principals_passwords_and_not_the_passwords(
        tmp_path: Path) -> None:
    config = server.write_config(tmp_path)
    text = config.read_text()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    for name, role in principals.PRINCIPALS.items():
        password = principals.password(name)
        assert password not in text
        assert f"quarkus.security.users.embedded.users.{name}=" \
               f"{principals.digest(name, password)}\n" in text
        assert f"quarkus.security.users.embedded.roles.{name}={role}\n" in text
    assert "apicurio.auth.role-based-authorization=true\n" in text
    assert "sr-admin" not in text, "no one is the registry's admin"
    assert f"apicurio.datasource.username={server.ROLE}\n" in text
    assert f"currentSchema={server.SCHEMA}" in text


def test_the_digest_is_quarkus_embedded_realm_s() -> None:
    # HEX(MD5("user:Quarkus:password")), as the realm checks it.
    assert principals.digest("alice", "alice") == "eb5f5ac94d90e0eeeb0c75f11cd1938f"


def test_it_refuses_to_start_on_a_port_another_program_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        monkeypatch.setattr(server, "REGISTRY_PORT", port)
        monkeypatch.setattr(server, "running", lambda: False)
        monkeypatch.setattr(server, "stop_group", lambda *a, **k: None)

        def not_fetched() -> Path:
            raise AssertionError("fetched its application with its port taken")
        monkeypatch.setattr(server, "app_home", not_fetched)
        with pytest.raises(SystemExit) as refused:
            server.start_registry()
    assert f"127.0.0.1:{port}" in str(refused.value)
    assert "REGISTRY_PORT" in str(refused.value)
