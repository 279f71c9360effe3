"""The database every service shares, and in it each service's schema, roles and migrations:
an owner role runs the migrations, an app role is what the service runs as."""

from __future__ import annotations

import os
import subprocess
import sys

from local_stack.postgres.programs import pg_bin
from local_stack.settings import (
    PG_ADMIN,
    PG_ADMIN_PASSWORD,
    PG_DB,
    PG_PORT,
    ROOT,
    SERVICE_PORTS,
    dsn,
    service_role_password,
)


def psql_admin(sql: str, db: str = PG_DB) -> None:
    env = {**os.environ, "PGPASSWORD": PG_ADMIN_PASSWORD}
    res = subprocess.run([pg_bin("psql"), "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", PG_ADMIN,
                          "-d", db, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
                         env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"[stack] SQL failed: {res.stderr.strip()}")


def bootstrap_database() -> None:
    """One database; per service a schema, an owner role (migrations) and an app role (runtime)."""
    env = {**os.environ, "PGPASSWORD": PG_ADMIN_PASSWORD}
    exists = subprocess.run([pg_bin("psql"), "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", PG_ADMIN,
                             "-d", "postgres", "-tAc",
                             f"SELECT 1 FROM pg_database WHERE datname = '{PG_DB}'"],
                            env=env, capture_output=True, text=True).stdout.strip()
    if exists != "1":
        psql_admin(f"CREATE DATABASE {PG_DB}", db="postgres")
    statements = [
        f"REVOKE ALL ON DATABASE {PG_DB} FROM PUBLIC",
        "REVOKE ALL ON SCHEMA public FROM PUBLIC",
        # For the operator and the benchmark (admin role); the services' roles cannot read it.
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
    ]
    for svc in SERVICE_PORTS:
        owner, app = f"{svc}_owner", f"{svc}_app"
        for role, kind in ((owner, "owner"), (app, "app")):
            pw = service_role_password(svc, kind).replace("'", "''")
            statements.append(
                f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') "
                f"THEN CREATE ROLE {role} LOGIN PASSWORD '{pw}'; "
                f"ELSE ALTER ROLE {role} LOGIN PASSWORD '{pw}'; END IF; END $$"
            )
            statements.append(f"GRANT CONNECT ON DATABASE {PG_DB} TO {role}")
            statements.append(f"ALTER ROLE {role} SET search_path = {svc}")
        statements += [
            f"CREATE SCHEMA IF NOT EXISTS {svc} AUTHORIZATION {owner}",
            f"GRANT USAGE ON SCHEMA {svc} TO {app}",
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {svc} "
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {app}",
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {svc} "
            f"GRANT USAGE, SELECT ON SEQUENCES TO {app}",
        ]
    psql_admin("; ".join(statements))


def migrate(service: str) -> None:
    env = {**os.environ, "DATABASE_URL": dsn(f"{service}_owner",
                                             service_role_password(service, "owner"))}
    res = subprocess.run([sys.executable, "-m", "alembic", "-c",
                          str(ROOT / "services" / service / "alembic.ini"), "upgrade", "head"],
                         cwd=ROOT / "services" / service, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"[stack] migrations of {service} failed:\n{res.stdout}\n{res.stderr}")
