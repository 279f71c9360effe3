"""Each service's login role reaches its own schema and nothing else (docs/operations.md#the-read-contract).

It connects to PostgreSQL as each service's login role: the roles are what it tests."""

from __future__ import annotations

import asyncpg
import pytest

from saga_harness import config

SERVICES = {"pedidos": "orders", "inventario": "products", "pagos": "payments"}


@pytest.mark.parametrize("service", sorted(SERVICES))
async def test_role_uses_its_own_schema(running_stack: None, service: str) -> None:
    conn = await asyncpg.connect(config.role_dsn(service))
    try:
        await conn.fetchval(f"SELECT count(*) FROM {service}.{SERVICES[service]}")
        await conn.fetchval(f"SELECT count(*) FROM {service}.outbox")
        await conn.fetchval(f"SELECT count(*) FROM {service}.processed_messages")
    finally:
        await conn.close()


@pytest.mark.parametrize(("service", "other"), [(s, o) for s in SERVICES for o in SERVICES
                                                if s != o])
async def test_role_cannot_read_or_write_another_schema(running_stack: None, service: str,
                                                        other: str) -> None:
    conn = await asyncpg.connect(config.role_dsn(service))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetchval(f"SELECT count(*) FROM {other}.{SERVICES[other]}")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"DELETE FROM {other}.outbox")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"CREATE TABLE {other}.intruder (x int)")
    finally:
        await conn.close()


@pytest.mark.parametrize("service", sorted(SERVICES))
async def test_runtime_role_cannot_change_the_schema(running_stack: None, service: str) -> None:
    conn = await asyncpg.connect(config.role_dsn(service))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"CREATE TABLE {service}.intruder (x int)")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("CREATE TABLE public.intruder (x int)")
    finally:
        await conn.close()


async def test_audit_trail_is_append_only_for_pedidos(running_stack: None) -> None:
    conn = await asyncpg.connect(config.role_dsn("pedidos"))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("DELETE FROM pedidos.saga_audit")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("UPDATE pedidos.saga_audit SET actor = 'x'")
    finally:
        await conn.close()


@pytest.mark.parametrize("service", sorted(SERVICES))
async def test_statement_statistics_are_the_operators_not_the_services(
        running_stack: None, service: str) -> None:
    """pg_stat_statements is loaded for the operator and the benchmark (bench/pg_statements.py);
    it holds every role's statements, so a service's role cannot read it."""
    admin = await asyncpg.connect(config.admin_dsn())
    try:
        assert await admin.fetchval(
            "SELECT count(*) FROM pg_stat_statements WHERE userid = "
            "(SELECT oid FROM pg_roles WHERE rolname = $1)", f"{service}_app") > 0
    finally:
        await admin.close()
    conn = await asyncpg.connect(config.role_dsn(service))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetchval("SELECT count(*) FROM public.pg_stat_statements")
    finally:
        await conn.close()
