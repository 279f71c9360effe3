"""PostgreSQL's programs: the server's at the pinned version (local_stack.postgres.binaries), the
clients Debian's; the server's run as the user that owns the cluster."""

from __future__ import annotations

import shutil
import subprocess

from local_stack.postgres.binaries import SERVER_PROGRAMS, server_home
from local_stack.postgres.data_dir import server_folder
from local_stack.postgres.os_user import pg_os_user
from local_stack.settings import PG_PORT

__all__ = ["as_pg_user", "pg_bin", "pg_os_user", "pg_ready"]


def pg_bin(name: str) -> str:
    if name in SERVER_PROGRAMS:
        return str(server_home(server_folder()) / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise SystemExit(f"[stack] PostgreSQL's client {name} not found: run "
                         f"deploy/local/bootstrap.sh local (Debian's postgresql-client)")
    return found


def as_pg_user(argv: list[str]) -> list[str]:
    user = pg_os_user()
    return ["runuser", "-u", user, "--", *argv] if user else argv


def pg_ready() -> bool:
    return subprocess.run([pg_bin("pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(PG_PORT)],
                          capture_output=True).returncode == 0
