"""The stack runs on the passwords it generated for itself: `make credentials` gives a working
admin URL, no role answers to its old committed default (its own name), the secrets are private
to their owner, and each service's process holds its own app role's password and no other."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from local_stack import passwords, secrets
from saga_harness import config, stack

SERVICES = ("pedidos", "inventario", "pagos")
ROLES = [config.PG_ADMIN_USER, *(f"{s}_{k}" for s in SERVICES for k in ("owner", "app"))]


def _credentials() -> dict:
    res = subprocess.run([sys.executable, "-m", "local_stack",
                          "credentials"], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(res.stdout)


async def test_make_credentials_gives_a_working_admin_url(running_stack: None) -> None:
    conn = await asyncpg.connect(_credentials()["postgres"]["admin_dsn"])
    try:
        assert await conn.fetchval("SELECT current_user") == config.PG_ADMIN_USER
        assert await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    finally:
        await conn.close()


@pytest.mark.parametrize("role", ROLES)
async def test_no_role_answers_to_its_old_default_password(running_stack: None, role: str) -> None:
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(f"postgresql://{role}:{role}@127.0.0.1:{config.PG_PORT}/"
                              f"{config.PG_DATABASE}")


def test_the_generated_secrets_are_private(running_stack: None) -> None:
    generated = {passwords.ADMIN_SECRET: "PG_ADMIN_PASSWORD"}
    generated |= {passwords.role_secret(s, k): f"{s.upper()}_{k.upper()}_PASSWORD"
                  for s in SERVICES for k in passwords.ROLE_KINDS}
    assert stat.S_IMODE(secrets.SECRETS.stat().st_mode) == 0o700
    for name, variable in generated.items():
        if not os.environ.get(variable):  # one set by a person is not generated
            assert stat.S_IMODE(secrets.path_of(name).stat().st_mode) == 0o600, name


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_process_holds_its_app_role_and_no_other_password(
        running_stack: None, service: str) -> None:
    environ = {name: value for name, _, value in (
        entry.partition("=") for entry in
        Path(f"/proc/{stack.pid(service)}/environ").read_bytes().decode().split("\0") if entry)}
    assert f"//{service}_app:{passwords.known_role_password(service, 'app')}@" in \
        environ["DATABASE_URL"]
    others = [passwords.known_admin_password()]
    others += [passwords.known_role_password(s, k) for s in SERVICES
               for k in passwords.ROLE_KINDS if (s, k) != (service, "app")]
    held = " ".join(environ.values())
    assert [p for p in others if p and p in held] == []
    assert not [k for k in environ
                if k == "PG_ADMIN_PASSWORD" or k.endswith(("_OWNER_PASSWORD", "_APP_PASSWORD"))]
