"""The read contract against the real database: every view each service publishes is the one
its ``read-contract.json`` describes, column for column, and none a reader in the repository
uses is gone (saga_harness.read_contract); each reader role (console, sagactl, Grafana) reads
every view and nothing else: a base table, a write, a new object are refused."""

from __future__ import annotations

import asyncpg
import pytest

from saga_harness import config, read_contract

READERS = ("console", "sagactl", "grafana")
# A base table of each service's schema, beside its outbox and its operator actions.
BASE_TABLES = {"pedidos": "sagas", "inventario": "products", "pagos": "payments"}


@pytest.mark.parametrize("service", read_contract.SERVICES)
async def test_the_published_views_are_the_described_ones(running_stack: None,
                                                          service: str) -> None:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        published = await read_contract.published(conn, service)
    finally:
        await conn.close()
    assert published, f"{service} publishes no view"
    described = read_contract.described(service)
    assert read_contract.breaches(service, described, published, read_contract.readers()) == []


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("service", read_contract.SERVICES)
async def test_a_reader_reads_every_view_and_nothing_else(running_stack: None, reader: str,
                                                          service: str) -> None:
    conn = await asyncpg.connect(config.reader_dsn(reader))
    try:
        for view in read_contract.described(service):
            await conn.fetch(f"SELECT * FROM {service}_read.{view} LIMIT 1")
        for table in (BASE_TABLES[service], "outbox", "processed_messages",
                      "operator_actions"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetchval(f"SELECT count(*) FROM {service}.{table}")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"INSERT INTO {service}_read.operator_actions_v1 "
                               "(operator, action) VALUES ('intruder', 'forged')")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"DELETE FROM {service}_read.outbox_v1")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"CREATE VIEW {service}_read.intruder AS SELECT 1")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"CREATE TABLE {service}.intruder (x int)")
    finally:
        await conn.close()


@pytest.mark.parametrize("reader", READERS)
async def test_a_reader_is_a_member_of_the_three_reader_groups_and_nothing_else(
        running_stack: None, reader: str) -> None:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        groups = await conn.fetch(
            "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid "
            "JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = $1", f"{reader}_reader")
        attributes = await conn.fetchrow(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolcanlogin "
            "FROM pg_roles WHERE rolname = $1", f"{reader}_reader")
        group_logins = await conn.fetch(
            "SELECT rolname FROM pg_roles WHERE rolname LIKE '%\\_reader' AND rolcanlogin "
            "AND rolname = ANY($1::text[])", [f"{s}_reader" for s in read_contract.SERVICES])
    finally:
        await conn.close()
    assert sorted(g["rolname"] for g in groups) == sorted(
        f"{s}_reader" for s in read_contract.SERVICES)
    assert dict(attributes) == {"rolsuper": False, "rolcreaterole": False, "rolcreatedb": False,
                                "rolbypassrls": False, "rolcanlogin": True}
    assert group_logins == [], "a <service>_reader group cannot log in"
