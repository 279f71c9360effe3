"""Where sagactl reads and whom it calls: the one place that knows its database URLs, the
services' addresses and its operator token.

It reads the services' published views (``<service>_read``) as ``SAGACTL_DATABASE_URL``: a
reader role (``sagactl_reader``), which may read those views and nothing else. In a checkout
beside a local stack, the default is that stack's ``sagactl_reader`` with the password it
generated (``make credentials``, ``postgres.reader_dsns.sagactl``), never an admin. Installed
elsewhere, it knows no database but the one it is given.

The dead letters too are read through a view (``<service>_read.dead_letters_v1``); replays
reach Kafka as the ``operator`` principal (``sagactl.operator_access``).

Its actions go through the services' APIs (``SAGACTL_PEDIDOS_URL``, ``SAGACTL_PAGOS_URL``) with
an operator's bearer token: ``SAGACTL_TOKEN``, or in a checkout one the local identity provider
hands to the login name (``$USER``) with the role ``operator`` (a development stand-in: a real
issuer's token is given in ``SAGACTL_TOKEN``).
"""

from __future__ import annotations

import getpass
import json
import os
import urllib.request
from typing import Any

import asyncpg

from sagakit.store.postgres_url import postgres_target


def local_stack_credentials() -> dict[str, Any] | None:
    """``make credentials`` of the local stack when sagactl runs in a checkout beside it;
    installed on its own, sagactl knows no database, broker or password but those it is given."""
    try:
        from local_stack.credentials import credentials
    except ModuleNotFoundError as missing:
        if missing.name != "local_stack":
            raise
        return None
    made: dict[str, Any] = credentials()
    return made


def reader_dsn() -> str:
    """The reader role's URL: ``SAGACTL_DATABASE_URL``, or the local stack's sagactl_reader."""
    given = os.environ.get("SAGACTL_DATABASE_URL")
    if given:
        return given
    stack = local_stack_credentials()
    if stack is None:
        raise SystemExit("sagactl: set SAGACTL_DATABASE_URL (postgresql://sagactl_reader:"
                         "password@host:port/database: a role that reads the services' "
                         "published views)")
    reader: str | None = stack["postgres"].get("reader_dsns", {}).get("sagactl")
    if reader is None:
        raise SystemExit("sagactl: the local stack has not generated its credentials yet "
                         "(`make up`); or set SAGACTL_DATABASE_URL")
    return reader


async def connect(dsn: str) -> asyncpg.Connection:
    # libpq's TLS parameters in the URL (sslmode, sslrootcert...) as the services read them.
    target = postgres_target(dsn)
    conn: asyncpg.Connection = await asyncpg.connect(target.dsn(), **target.connect_args())
    return conn


def _given_url(service: str) -> str | None:
    if service == "pedidos":
        return os.environ.get("SAGACTL_PEDIDOS_URL")
    if service == "pagos":
        return os.environ.get("SAGACTL_PAGOS_URL")
    raise ValueError(f"sagactl calls no API of {service}")


def service_url(service: str) -> str:
    """The base URL of ``service``'s API."""
    given = _given_url(service)
    if given:
        return given.rstrip("/")
    try:
        from local_stack.settings import SERVICE_PORTS
    except ModuleNotFoundError:
        raise SystemExit(f"sagactl: set SAGACTL_{service.upper()}_URL") from None
    return f"http://127.0.0.1:{SERVICE_PORTS[service]}"


def operator_token() -> str:
    """``SAGACTL_TOKEN``, or in a checkout a token of the local identity provider for
    ``$USER`` with the role operator."""
    given = os.environ.get("SAGACTL_TOKEN")
    if given:
        return given
    stack = local_stack_credentials()
    token_url = None if stack is None else stack["identity"]["token_url"]
    if token_url is None:
        raise SystemExit("sagactl: set SAGACTL_TOKEN (an operator's bearer token)")
    subject = getpass.getuser()
    request = urllib.request.Request(
        token_url, data=json.dumps({"sub": subject, "roles": ["operator"]}).encode(),
        headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            token: str = json.load(answer)["access_token"]
    except OSError as exc:
        raise SystemExit(f"sagactl: no token from the local identity provider at {token_url} "
                         f"({exc}); set SAGACTL_TOKEN") from None
    return token
