"""Where sagactl reads: the one place that knows its database URLs (whom it calls, and as whom,
is ``sagactl.operator_access``).

It reads the services' published views (``<service>_read``) as ``SAGACTL_DATABASE_URL``: a
reader role (``sagactl_reader``), which may read those views and nothing else. In a checkout
beside a local stack, the default is that stack's ``sagactl_reader`` with the password it
generated (``make credentials``, ``postgres.reader_dsns.sagactl``), never an admin. Installed
elsewhere, it knows no database but the one it is given.

The dead letters too are read through a view (``<service>_read.dead_letters_v1``); replays
reach Kafka as the ``operator`` principal (``sagactl.operator_access``).

Its actions go through the services' APIs with an operator's bearer token
(``sagactl.operator_access``).
"""

from __future__ import annotations

import os
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
