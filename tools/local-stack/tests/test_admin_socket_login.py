"""Before PostgreSQL starts, the stack lets the OS user that runs the cluster in as the admin role
over the cluster's own socket: the way it sets the admin password on every start, whatever the
cluster had before (postgres/cluster.py, database.keep_admin_password)."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from local_stack import secrets
from local_stack.postgres import cluster, database, scram


def _cluster_files(data: Path) -> None:
    data.mkdir()
    (data / "pg_hba.conf").write_text("# made by initdb\nlocal all all peer\n"
                                      "host all all 127.0.0.1/32 scram-sha-256\n")
    (data / "pg_ident.conf").write_text("# MAPNAME SYSTEM-USERNAME PG-USERNAME\n")


def test_the_clusters_os_user_may_log_in_as_admin_over_the_socket_only(tmp_path: Path) -> None:
    data = tmp_path / "pg"
    _cluster_files(data)
    cluster.admit_os_user_as_admin(data, "postgres")
    rules = [line for line in (data / "pg_hba.conf").read_text().splitlines()
             if line and not line.startswith("#")]
    # The first rule that matches decides: ours must come before initdb's.
    assert rules[0] == f"local all {cluster.PG_ADMIN} peer map={cluster.PEER_MAP}"
    assert rules[1:] == ["local all all peer", "host all all 127.0.0.1/32 scram-sha-256"]
    assert (data / "pg_ident.conf").read_text().splitlines()[-1] == \
        f"{cluster.PEER_MAP} postgres {cluster.PG_ADMIN}"


def test_letting_the_os_user_in_twice_changes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "pg"
    _cluster_files(data)
    cluster.admit_os_user_as_admin(data, "dev")
    once = {f: (data / f).read_text() for f in ("pg_hba.conf", "pg_ident.conf")}
    cluster.admit_os_user_as_admin(data, "dev")
    assert {f: (data / f).read_text() for f in once} == once


class _Psql:
    """Stands in for subprocess.run in database.py: records each psql call, succeeds."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str, dict[str, str] | None]] = []

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((argv, kwargs.get("input", ""), kwargs.get("env")))
        return subprocess.CompletedProcess(argv, 0, "1\n", "")


@pytest.fixture
def psql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _Psql:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    monkeypatch.delenv("PG_ADMIN_PASSWORD", raising=False)
    monkeypatch.setattr(database, "pg_bin", lambda name: f"/usr/bin/{name}")
    fake = _Psql()
    monkeypatch.setattr(database.subprocess, "run", fake)
    return fake


def _verifies(verifier: str, password: str) -> bool:
    """Whether ``verifier`` (SCRAM-SHA-256$<iterations>:<salt>$<stored>:<server>) is
    ``password``'s."""
    head, keys = verifier.split("$")[1:]
    iterations, salt = head.split(":")
    stored = keys.split(":")[0]
    derived = scram.keys(password, base64.b64decode(salt), int(iterations))[1]
    return base64.b64encode(derived).decode() == stored


def test_the_admin_password_is_set_over_the_socket_and_never_sent_in_the_clear(
        psql: _Psql, tmp_path: Path) -> None:
    data = tmp_path / "pg"
    database.keep_admin_password(data)
    [(argv, sql, env)] = psql.calls
    password = secrets.existing("postgres-admin")
    assert password is not None
    assert argv[argv.index("-h") + 1] == str(data)  # the socket's directory, not TCP
    assert argv[argv.index("-U") + 1] == cluster.PG_ADMIN
    verifier = re.fullmatch(rf"ALTER ROLE {cluster.PG_ADMIN} PASSWORD '([^']+)';\n", sql)
    assert verifier and _verifies(verifier[1], password)
    assert not any(password in arg for arg in [*argv, sql])
    assert env is None or "PGPASSWORD" not in env  # peer authentication: no password needed


def test_the_roles_get_verifiers_of_their_passwords_on_standard_input(psql: _Psql) -> None:
    database.bootstrap_database()
    sent = "".join(sql for _, sql, _ in psql.calls)
    for service in ("pedidos", "inventario", "pagos"):
        for kind in ("owner", "app"):
            password = secrets.existing(f"{service}-{kind}")
            assert password is not None
            verifier = re.search(rf"ROLE {service}_{kind} LOGIN PASSWORD '([^']+)'", sent)
            assert verifier and _verifies(verifier[1], password), f"{service}_{kind}"
            assert not any(password in part for argv, sql, _ in psql.calls
                           for part in [*argv, sql])
