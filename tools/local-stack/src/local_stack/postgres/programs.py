"""PostgreSQL's programs, found in the newest installed version, run as the user that owns the
cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from local_stack.settings import PG_PORT


def pg_bin(name: str) -> str:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    for c in reversed(candidates):
        if (c / name).exists():
            return str(c / name)
    found = shutil.which(name)
    if not found:
        raise SystemExit(f"[stack] PostgreSQL binary {name} not found: run deploy/local/bootstrap.sh")
    return found


def pg_os_user() -> str | None:
    """PostgreSQL refuses to run as root: under root the cluster belongs to 'postgres'."""
    return "postgres" if os.geteuid() == 0 else None


def as_pg_user(argv: list[str]) -> list[str]:
    user = pg_os_user()
    return ["runuser", "-u", user, "--", *argv] if user else argv


def pg_ready() -> bool:
    return subprocess.run([pg_bin("pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(PG_PORT)],
                          capture_output=True).returncode == 0
