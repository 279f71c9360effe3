"""The services' connections to a PostgreSQL that speaks TLS (a managed one, or the local stack
started with SAGA_PG_TLS=1): with ``sslmode=verify-full`` and the CA in ``sslrootcert``, the
pool, the relay's own connection and sagactl connect over TLS, which the server confirms
(``pg_stat_ssl``). Run only on such a stack (marker ``pg_tls``; run-tests.sh selects it when
SAGA_PG_TLS=1)."""

from __future__ import annotations

import argparse
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text

from local_stack.postgres.tls import with_stack_tls
from saga_harness import config
from sagakit.outbox.relay import OutboxRelay
from sagakit.settings import MessagingSettings
from sagakit.store.database import build_engine
from sagakit.store.postgres_url import postgres_target
from sagakit.store.tables import messaging_tables, service_metadata

pytestmark = pytest.mark.pg_tls

ENCRYPTED = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


def _verified_url() -> str:
    url = with_stack_tls(config.admin_dsn())
    assert "sslmode=verify-full" in url, "the stack was not started with SAGA_PG_TLS=1"
    return url


async def test_the_pool_connects_with_verify_full(running_stack: None) -> None:
    engine = build_engine(_verified_url().replace("postgresql://", "postgresql+asyncpg://"),
                          "tls-test", 1)
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text(ENCRYPTED))).scalar_one() is True
    finally:
        await engine.dispose()


async def test_the_relays_own_connection_is_encrypted_too(running_stack: None) -> None:
    engine = build_engine(_verified_url().replace("postgresql://", "postgresql+asyncpg://"),
                          "tls-test", 1)
    relay = OutboxRelay(engine, messaging_tables(service_metadata("pedidos")), "tls-test",
                        MessagingSettings())
    try:
        await relay._ensure_connection()
        assert relay._listen_conn is not None
        assert await relay._listen_conn.fetchval(ENCRYPTED) is True
    finally:
        await relay.close()
        await engine.dispose()


async def test_sagactl_connects_with_verify_full(running_stack: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from sagactl import cli

    monkeypatch.setenv("SAGACTL_DATABASE_URL", _verified_url())
    args: Any = argparse.Namespace(command="sagas", status=None, older_than=0.0, stuck=False,
                                   limit=1, output="text")
    assert await cli.run(args) == 0
    target = postgres_target(_verified_url())
    conn = await asyncpg.connect(target.dsn(), **target.connect_args())
    try:
        assert await conn.fetchval(ENCRYPTED) is True
    finally:
        await conn.close()


async def test_a_server_certificate_from_another_ca_is_refused(running_stack: None,
                                                               tmp_path: Any) -> None:
    from local_stack.postgres.tls import make_certificates

    stranger = make_certificates(tmp_path / "other")
    url = config.admin_dsn() + f"?sslmode=verify-full&sslrootcert={stranger.ca_cert}"
    target = postgres_target(url)
    with pytest.raises(Exception, match="certificate verify failed"):
        await asyncpg.connect(target.dsn(), **target.connect_args())
