"""libpq's TLS parameters in a database URL, as asyncpg takes them: ``sslmode=require``
encrypts without verifying (libpq's behaviour), ``verify-ca`` checks the CA, ``verify-full`` the
CA and the host name; the pool, the relay's own connection and sagactl all go through it.

The handshakes are made with a stand-in for PostgreSQL that accepts the SSLRequest, completes
TLS with a certificate of a CA made for the test, reads the startup message and refuses the
password: a client that got that far spoke TLS with the server it was told to trust."""

from __future__ import annotations

import argparse
import asyncio
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from local_stack.postgres.tls import TlsFiles, make_certificates
from sagakit.outbox.relay import OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.store.database import build_engine
from sagakit.store.postgres_url import InvalidDatabaseUrl, postgres_target, ssl_for
from sagakit.store.tables import messaging_tables, service_metadata

SSL_REQUEST = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")
REFUSED = b"SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed\0\0"


@dataclass
class FakePostgres:
    """What it saw: the startup messages that reached it over TLS, as parameter maps."""

    port: int = 0
    startups: list[dict[str, str]] = field(default_factory=list)
    refused_handshakes: int = 0


@pytest.fixture(scope="module")
def server_for_ip(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_certificates(tmp_path_factory.mktemp("tls-ip"), hosts=("127.0.0.1",))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_certificates(tmp_path_factory.mktemp("tls-other"), hosts=("127.0.0.1",))


@pytest.fixture(scope="module")
def server_for_a_name(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_certificates(tmp_path_factory.mktemp("tls-name"), hosts=("db.example",))


async def _serve(files: TlsFiles) -> tuple[asyncio.Server, FakePostgres]:
    seen = FakePostgres()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.server_cert, files.server_key)

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if await reader.readexactly(8) != SSL_REQUEST:
                return  # a client that does not ask for TLS gets nothing
            writer.write(b"S")
            await writer.drain()
            try:
                await writer.start_tls(context)
            except (ssl.SSLError, ConnectionError):
                seen.refused_handshakes += 1
                return
            length = int.from_bytes(await reader.readexactly(4), "big")
            body = (await reader.readexactly(length - 4))[4:].split(b"\0")
            seen.startups.append({k.decode(): v.decode() for k, v in zip(body[::2], body[1::2],
                                                                         strict=False) if k})
            writer.write(b"E" + (len(REFUSED) + 4).to_bytes(4, "big") + REFUSED)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(session, "127.0.0.1", 0)
    seen.port = server.sockets[0].getsockname()[1]
    return server, seen


@pytest.fixture
async def fake_postgres(server_for_ip: TlsFiles) -> AsyncIterator[FakePostgres]:
    server, seen = await _serve(server_for_ip)
    async with server:
        yield seen


def _url(port: int, query: str, driver: str = "postgresql+asyncpg") -> str:
    return f"{driver}://saga@127.0.0.1:{port}/saga?{query}"


async def _connect(url: str) -> None:
    target = postgres_target(url)
    conn = await asyncpg.connect(target.dsn(), timeout=5, **target.connect_args())
    await conn.close()


# ---------------------------------------------------------------- the translation


def test_each_sslmode_is_the_context_libpq_would_use(server_for_ip: TlsFiles) -> None:
    require = ssl_for("require")
    assert isinstance(require, ssl.SSLContext)
    assert (require.verify_mode, require.check_hostname) == (ssl.CERT_NONE, False)
    ca = str(server_for_ip.ca_cert)
    verify_ca = ssl_for("verify-ca", rootcert=ca)
    assert isinstance(verify_ca, ssl.SSLContext)
    assert (verify_ca.verify_mode, verify_ca.check_hostname) == (ssl.CERT_REQUIRED, False)
    full = ssl_for("verify-full", rootcert=ca)
    assert isinstance(full, ssl.SSLContext)
    assert (full.verify_mode, full.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert len(full.get_ca_certs()) == 1
    # As libpq: require with a root certificate verifies the CA.
    with_root = ssl_for("require", rootcert=ca)
    assert isinstance(with_root, ssl.SSLContext)
    assert (with_root.verify_mode, with_root.check_hostname) == (ssl.CERT_REQUIRED, False)
    assert ssl_for("disable") is False
    assert ssl_for("prefer") == "prefer" and ssl_for("allow") == "allow"
    assert ssl_for(None) is None


def test_the_translated_parameters_never_reach_the_driver_as_keywords(
        server_for_ip: TlsFiles) -> None:
    target = postgres_target(_url(5432, f"sslmode=verify-full&sslrootcert={server_for_ip.ca_cert}"
                                        "&application_name=sagactl"))
    assert target.dsn() == "postgresql://saga@127.0.0.1:5432/saga"
    args = target.connect_args({"statement_timeout": "5s"})
    assert isinstance(args["ssl"], ssl.SSLContext)
    assert args["server_settings"] == {"application_name": "sagactl", "statement_timeout": "5s"}
    assert postgres_target(_url(5432, "")).connect_args() == {}


def test_parameters_that_cannot_be_honoured_stop_with_their_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.postgresql/root.crt
    with pytest.raises(InvalidDatabaseUrl, match=r"sslmode=verify-full .* sslrootcert"):
        postgres_target(_url(5432, "sslmode=verify-full"))
    with pytest.raises(InvalidDatabaseUrl, match="sslmode=maybe"):
        postgres_target(_url(5432, "sslmode=maybe"))
    with pytest.raises(InvalidDatabaseUrl, match=r"sslrootcert=/nowhere/ca\.pem"):
        postgres_target(_url(5432, "sslmode=verify-ca&sslrootcert=/nowhere/ca.pem"))
    with pytest.raises(InvalidDatabaseUrl, match="sslcert and sslkey"):
        postgres_target(_url(5432, f"sslmode=require&sslcert={tmp_path}"))
    with pytest.raises(InvalidDatabaseUrl, match="both ssl and sslmode"):
        postgres_target(_url(5432, "sslmode=require&ssl=require"))


# ---------------------------------------------------------------- the handshakes


async def test_require_encrypts_without_verifying_the_certificate(
        fake_postgres: FakePostgres) -> None:
    with pytest.raises(asyncpg.InvalidPasswordError):
        await _connect(_url(fake_postgres.port, "sslmode=require"))
    assert len(fake_postgres.startups) == 1, "the startup message went over TLS"


async def test_verify_full_trusts_only_its_ca(fake_postgres: FakePostgres, server_for_ip: TlsFiles,
                                              other_ca: TlsFiles) -> None:
    with pytest.raises(asyncpg.InvalidPasswordError):
        await _connect(_url(fake_postgres.port,
                            f"sslmode=verify-full&sslrootcert={server_for_ip.ca_cert}"))
    with pytest.raises(ssl.SSLCertVerificationError):
        await _connect(_url(fake_postgres.port,
                            f"sslmode=verify-full&sslrootcert={other_ca.ca_cert}"))
    assert len(fake_postgres.startups) == 1, "the client went on with a server it cannot trust"


async def test_verify_full_checks_the_host_name_and_verify_ca_does_not(
        server_for_a_name: TlsFiles) -> None:
    server, seen = await _serve(server_for_a_name)  # its certificate names db.example only
    async with server:
        ca = server_for_a_name.ca_cert
        with pytest.raises(asyncpg.InvalidPasswordError):
            await _connect(_url(seen.port, f"sslmode=verify-ca&sslrootcert={ca}"))
        with pytest.raises(ssl.SSLCertVerificationError, match=r"127\.0\.0\.1"):
            await _connect(_url(seen.port, f"sslmode=verify-full&sslrootcert={ca}"))
    assert len(seen.startups) == 1


async def test_the_pool_connects_over_tls_with_a_libpq_url(fake_postgres: FakePostgres,
                                                           server_for_ip: TlsFiles) -> None:
    """SQLAlchemy handed ``sslmode`` to asyncpg as a keyword: a TypeError at the first
    connection. Now the pool's connections speak TLS, named as the service."""
    engine = build_engine(_url(fake_postgres.port,
                               f"sslmode=verify-full&sslrootcert={server_for_ip.ca_cert}"),
                          "pedidos", 1)
    try:
        with pytest.raises(DBAPIError) as refused:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        assert isinstance(refused.value.orig.__cause__, asyncpg.InvalidPasswordError)  # type: ignore[union-attr]
    finally:
        await engine.dispose()
    assert [s.get("application_name") for s in fake_postgres.startups] == ["pedidos"]


async def test_the_relays_own_connection_takes_the_pools_tls_parameters(
        fake_postgres: FakePostgres, server_for_ip: TlsFiles) -> None:
    engine = build_engine(_url(fake_postgres.port,
                               f"sslmode=verify-full&sslrootcert={server_for_ip.ca_cert}"),
                          "pedidos", 1)
    relay = OutboxRelay(engine, messaging_tables(service_metadata("pedidos")), "pedidos",
                        MessagingSettings(), instance="2")
    try:
        with pytest.raises(asyncpg.InvalidPasswordError):
            await relay._ensure_connection()
    finally:
        await engine.dispose()
    assert [s.get("application_name") for s in fake_postgres.startups] == ["pedidos-relay@2"]


async def test_sagactl_connects_over_tls_with_a_libpq_url(
        fake_postgres: FakePostgres, server_for_ip: TlsFiles,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sagactl import cli

    monkeypatch.setenv("SAGACTL_DATABASE_URL", _url(
        fake_postgres.port, f"sslmode=verify-full&sslrootcert={server_for_ip.ca_cert}",
        driver="postgresql"))
    args: Any = argparse.Namespace(command="sagas")
    with pytest.raises(asyncpg.InvalidPasswordError):
        await cli.run(args)
    assert len(fake_postgres.startups) == 1
