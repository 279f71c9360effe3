"""A PostgreSQL URL as libpq reads it, for asyncpg: ``sslmode``, ``sslrootcert``, ``sslcert``,
``sslkey``, ``sslpassword``, ``sslcrl`` and ``application_name`` in its query.

A managed PostgreSQL is reached with such a URL (``?sslmode=verify-full&sslrootcert=ca.pem``).
SQLAlchemy hands every query parameter to ``asyncpg.connect`` as a keyword, which takes none of
these (a TypeError at the first connection), so they are taken out and turned into what asyncpg
takes: an ``ssl`` context built here, as libpq would behave with the same parameters, and
``server_settings``. Every connection of the project to a service's database goes through
``postgres_target``: the services' pool (``sagakit.store.database.build_engine``), the relay's
own connection, the migrations and sagactl.

What each ``sslmode`` means (libpq's table, "SSL Mode Descriptions"):

- ``disable``: no TLS. ``allow``, ``prefer``: TLS if the server offers it, unverified; left to
  asyncpg, which implements the fallback. Absent: asyncpg's default (``prefer``, or PGSSLMODE).
- ``require``: TLS, the certificate not verified (encryption only). As in libpq, a
  ``sslrootcert`` given with it makes it ``verify-ca``.
- ``verify-ca``: the certificate must chain to the CA of ``sslrootcert``.
- ``verify-full``: and name the host connected to.

``sslrootcert=system`` (PostgreSQL 16's) trusts the system's CAs. A verifying mode without
``sslrootcert`` reads ``~/.postgresql/root.crt``, as libpq does, and stops if there is none.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
# The query parameters translated here: none of them reaches asyncpg as a keyword.
TRANSLATED = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslcrl",
              "application_name")


class InvalidDatabaseUrl(ValueError):
    """A TLS parameter that cannot be honoured; the message names it, never the password."""


@dataclass(frozen=True)
class PostgresTarget:
    url: URL
    """The URL without the translated parameters (its driver as it was given)."""
    ssl: ssl.SSLContext | str | bool | None
    """What asyncpg's ``ssl`` takes; None: not given, asyncpg's default."""
    server_settings: dict[str, str] = field(default_factory=dict)

    def connect_args(self, server_settings: dict[str, str] | None = None) -> dict[str, Any]:
        """Keywords for ``asyncpg.connect`` besides the URL's own (SQLAlchemy's
        ``connect_args``); ``server_settings`` given here win over the URL's."""
        args: dict[str, Any] = {}
        if self.ssl is not None:
            args["ssl"] = self.ssl
        settings = {**self.server_settings, **(server_settings or {})}
        if settings:
            args["server_settings"] = settings
        return args

    def dsn(self) -> str:
        """The URL for ``asyncpg.connect(dsn, **connect_args())``: a plain ``postgresql://``."""
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)


def postgres_target(url: URL | str) -> PostgresTarget:
    u = make_url(url) if isinstance(url, str) else url
    query = {k: v if isinstance(v, str) else v[-1] for k, v in u.query.items()}
    if "ssl" in query and "sslmode" in query:
        raise InvalidDatabaseUrl("the database URL gives both ssl and sslmode: give sslmode")
    context = ssl_for(query.get("sslmode"), rootcert=query.get("sslrootcert"),
                      cert=query.get("sslcert"), key=query.get("sslkey"),
                      key_password=query.get("sslpassword"), crl=query.get("sslcrl"))
    settings = {"application_name": query["application_name"]} if "application_name" in query \
        else {}
    return PostgresTarget(u.difference_update_query(TRANSLATED), context, settings)


def ssl_for(mode: str | None, *, rootcert: str | None = None, cert: str | None = None,
            key: str | None = None, key_password: str | None = None,
            crl: str | None = None) -> ssl.SSLContext | str | bool | None:
    """asyncpg's ``ssl`` for libpq's ``sslmode`` and the files that go with it."""
    if mode is None:
        if rootcert or cert:
            raise InvalidDatabaseUrl("sslrootcert and sslcert need an sslmode (require, "
                                     "verify-ca or verify-full)")
        return None
    if mode not in SSL_MODES:
        raise InvalidDatabaseUrl(f"sslmode={mode} is not one of {', '.join(SSL_MODES)}")
    if mode == "disable":
        return False
    if mode in ("allow", "prefer"):
        return mode
    if mode == "require" and rootcert:
        mode = "verify-ca"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if mode == "require":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context.check_hostname = mode == "verify-full"
        context.verify_mode = ssl.CERT_REQUIRED
        _trust(context, mode, rootcert)
        if crl:
            context.load_verify_locations(cafile=_readable(crl, "sslcrl"))
            context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if cert or key:
        if not (cert and key):
            raise InvalidDatabaseUrl("a client certificate needs both sslcert and sslkey")
        context.load_cert_chain(_readable(cert, "sslcert"), _readable(key, "sslkey"),
                                password=key_password)
    return context


def _trust(context: ssl.SSLContext, mode: str, rootcert: str | None) -> None:
    if rootcert == "system":
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        return
    if rootcert is None:
        default = Path.home() / ".postgresql" / "root.crt"
        if not default.is_file():
            raise InvalidDatabaseUrl(
                f"sslmode={mode} verifies the server's certificate: give sslrootcert (the CA's "
                f"PEM file, or system for the system's CAs); {default} does not exist")
        rootcert = str(default)
    context.load_verify_locations(cafile=_readable(rootcert, "sslrootcert"))


def _readable(path: str, parameter: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidDatabaseUrl(f"{parameter}={path}: no such file")
    return str(p)


def create_engine_for(url: URL | str, *, server_settings: dict[str, str] | None = None,
                      connect_args: dict[str, Any] | None = None, **kwargs: Any) -> AsyncEngine:
    """SQLAlchemy's async engine for ``url``, its libpq parameters translated at every connect
    (``engine.url`` keeps them: the relay reads its own connection's from it)."""
    target = postgres_target(url)
    engine = create_async_engine(url, connect_args=connect_args or {}, **kwargs)

    @event.listens_for(engine.sync_engine, "do_connect")
    def _translated(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        for name in TRANSLATED:
            cparams.pop(name, None)
        cparams.update(target.connect_args(
            {**cparams.get("server_settings", {}), **(server_settings or {})}))

    return engine
