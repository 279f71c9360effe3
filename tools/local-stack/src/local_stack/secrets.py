"""The secrets the local stack makes for itself: generated at first use, kept under
``.local/secrets/`` (the directory 0700, each file 0600; ``.local/`` is git-ignored), read back
on every later start, so that nothing secret is ever committed and a stack keeps its passwords
across restarts. Another process of the project (the tests, the tools, ``make credentials``)
reads the same files.

Names are plain file names: ``postgres-admin``, ``pedidos-app``, ``kafka-pedidos``... A value is
text (a password) or bytes (a key), written whole with ``O_EXCL`` so that two processes starting
at once agree on one value.
"""

from __future__ import annotations

import os
import re
import secrets as random
from collections.abc import Callable
from pathlib import Path

from local_stack.settings import STATE

SECRETS = STATE / "secrets"

_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{0,63}$")


def path_of(name: str) -> Path:
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a secret name: {name!r}")
    return SECRETS / name


def _directory() -> Path:
    SECRETS.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(SECRETS, 0o700)  # mkdir's mode is masked by the umask, and an older dir may be wider
    return SECRETS


def stored(name: str, make: Callable[[], bytes]) -> bytes:
    """The secret ``name``: made with ``make`` and stored the first time, read back afterwards."""
    path = path_of(name)
    _directory()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    try:
        os.write(fd, make())
    finally:
        os.close(fd)
    return path.read_bytes()


def password(name: str) -> str:
    """A random password (32 URL-safe characters: letters, digits, ``-`` and ``_``, which need
    no quoting in a DSN, a JAAS line or SQL)."""
    return stored(name, lambda: random.token_urlsafe(24).encode()).decode()


def existing(name: str) -> str | None:
    """A stored secret's text, or None when the stack never made it (nothing is generated)."""
    try:
        return path_of(name).read_text()
    except FileNotFoundError:
        return None
