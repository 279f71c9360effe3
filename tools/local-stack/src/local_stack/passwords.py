"""The local stack's PostgreSQL passwords: the one a person set in the environment, or else the one
the stack generated for itself at its first start (``local_stack.secrets``, ``.local/secrets/``).

The stack itself asks for them with ``admin_password`` and ``role_password``, which make a
missing one. Every other reader (``make credentials``, the tests, the tools) asks with the
``known_`` functions, which never make one: a password the stack has not made yet is one no
cluster has, and a client has nothing to gain from inventing it.
"""

from __future__ import annotations

import os

from local_stack import secrets

ADMIN_SECRET = "postgres-admin"
ROLE_KINDS = ("owner", "app")
# The consumers of the services' published read views, a login role each (``<consumer>_reader``),
# member of every service's ``<service>_reader`` group and of nothing else.
READERS = ("console", "sagactl", "grafana")


def role_secret(service: str, kind: str) -> str:
    """``pedidos-owner``, ``pagos-app``...: ``owner`` runs the migrations, ``app`` the service."""
    if kind not in ROLE_KINDS:
        raise ValueError(f"not a role kind: {kind!r}")
    return f"{service}-{kind}"


def _set_for_admin() -> str | None:
    return os.environ.get("PG_ADMIN_PASSWORD") or None


def _set_for_role(service: str, kind: str) -> str | None:
    return os.environ.get(f"{service.upper()}_{kind.upper()}_PASSWORD") or None


def admin_password() -> str:
    return _set_for_admin() or secrets.password(ADMIN_SECRET)


def role_password(service: str, kind: str) -> str:
    """The password of the role ``<service>_<kind>``."""
    return _set_for_role(service, kind) or secrets.password(role_secret(service, kind))


def known_admin_password() -> str | None:
    return _set_for_admin() or secrets.existing(ADMIN_SECRET)


def known_role_password(service: str, kind: str) -> str | None:
    return _set_for_role(service, kind) or secrets.existing(role_secret(service, kind))


def reader_role(consumer: str) -> str:
    """``console_reader``, ``sagactl_reader``, ``grafana_reader``."""
    if consumer not in READERS:
        raise ValueError(f"not a reader: {consumer!r}")
    return f"{consumer}_reader"


def _set_for_reader(consumer: str) -> str | None:
    return os.environ.get(f"{consumer.upper()}_READER_PASSWORD") or None


def reader_password(consumer: str) -> str:
    """The password of the login role ``<consumer>_reader``."""
    return _set_for_reader(consumer) or secrets.password(f"{consumer}-reader")


def known_reader_password(consumer: str) -> str | None:
    return _set_for_reader(consumer) or secrets.existing(f"{consumer}-reader")
