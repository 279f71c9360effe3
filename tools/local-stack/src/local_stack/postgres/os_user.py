"""The OS user PostgreSQL runs as."""

from __future__ import annotations

import os


def pg_os_user() -> str | None:
    """PostgreSQL refuses to run as root: under root the cluster belongs to 'postgres'."""
    return "postgres" if os.geteuid() == 0 else None
