"""The database every service shares, and in it each service's schema, roles and migrations:
an owner role runs the migrations, an app role is what the service runs as."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from local_stack.passwords import admin_password, role_password
from local_stack.postgres import scram
from local_stack.postgres.programs import as_pg_user, pg_bin
from local_stack.postgres.tls import with_stack_tls
from local_stack.settings import PG_ADMIN, PG_DB, PG_PORT, ROOT, SERVICE_PORTS, dsn


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _password(password: str) -> str:
    """The ``PASSWORD`` of ``ALTER``/``CREATE ROLE``: the password's SCRAM verifier, so that the
    password itself is in no statement text the server could log. (A non-ASCII password, which
    only a person can have set, goes as it is: PostgreSQL normalizes those first.)"""
    return _literal(scram.verifier(password) if password.isascii() else password)


def _psql(options: list[str], sql: str, env: dict[str, str] | None = None,
          as_cluster_user: bool = False) -> subprocess.CompletedProcess[str]:
    """psql as the admin role, reading ``sql`` on its standard input: statements that carry a
    password stay out of the command line, which any user of the machine can read in /proc."""
    argv = [pg_bin("psql"), "-X", "-v", "ON_ERROR_STOP=1", "-q", "-p", str(PG_PORT),
            "-U", PG_ADMIN, *options]
    return subprocess.run(as_pg_user(argv) if as_cluster_user else argv, input=sql + ";\n",
                          env=env, capture_output=True, text=True)


def _over_tcp() -> dict[str, str]:
    return {**os.environ, "PGPASSWORD": admin_password()}


def psql_admin(sql: str, db: str = PG_DB) -> None:
    res = _psql(["-h", "127.0.0.1", "-d", db], sql, _over_tcp())
    if res.returncode != 0:
        raise SystemExit(f"[stack] SQL failed: {res.stderr.strip()}")


def keep_admin_password(data: Path) -> None:
    """Sets the admin role's password to the stack's own (``PG_ADMIN_PASSWORD``, or the one it
    generated), logged in over the cluster's Unix socket as the OS user that runs it
    (cluster.admit_os_user_as_admin), so that no earlier password has to be known."""
    res = _psql(["-h", str(data), "-d", "postgres"],
                f"ALTER ROLE {PG_ADMIN} PASSWORD {_password(admin_password())}",
                as_cluster_user=True)
    if res.returncode != 0:
        raise SystemExit(f"[stack] could not set the password of PostgreSQL's admin role over "
                         f"the socket in {data}: {res.stderr.strip()} (a cluster started before "
                         f"the stack let its OS user in: `make down`, then `make up`)")


def bootstrap_database() -> None:
    """One database; per service a schema, an owner role (migrations), an app role (runtime), the
    schema of its published read views and the group role they are granted to."""
    exists = _psql(["-h", "127.0.0.1", "-d", "postgres", "-tA"],
                   f"SELECT 1 FROM pg_database WHERE datname = {_literal(PG_DB)}",
                   _over_tcp()).stdout.strip()
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
            # Set again on every start: the password of a role made earlier (with another
            # password, or the old committed default) becomes the one the stack keeps.
            pw = _password(role_password(svc, kind))
            statements.append(
                f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') "
                f"THEN CREATE ROLE {role} LOGIN PASSWORD {pw}; "
                f"ELSE ALTER ROLE {role} LOGIN PASSWORD {pw}; END IF; END $$"
            )
            statements.append(f"GRANT CONNECT ON DATABASE {PG_DB} TO {role}")
            statements.append(f"ALTER ROLE {role} SET search_path = {svc}")
        # The group role the published read views are granted to (<svc>_read, made by the
        # service's migrations): readers get it, never a login of their own here.
        reader = f"{svc}_reader"
        statements.append(
            f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{reader}') "
            f"THEN CREATE ROLE {reader} NOLOGIN; END IF; END $$")
        statements += [
            f"CREATE SCHEMA IF NOT EXISTS {svc} AUTHORIZATION {owner}",
            f"CREATE SCHEMA IF NOT EXISTS {svc}_read AUTHORIZATION {owner}",
            f"GRANT USAGE ON SCHEMA {svc} TO {app}",
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {svc} "
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {app}",
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {svc} "
            f"GRANT USAGE, SELECT ON SEQUENCES TO {app}",
        ]
    psql_admin("; ".join(statements))


def migrate(service: str) -> None:
    """The service's migrations, as a step of their own under its owner role: the service's
    process is then started with its app role only, and never sees the owner's password."""
    env = {**os.environ, "DATABASE_URL": with_stack_tls(
        dsn(f"{service}_owner", role_password(service, "owner")))}
    res = subprocess.run([sys.executable, "-m", "alembic", "-c",
                          str(ROOT / "services" / service / "alembic.ini"), "upgrade", "head"],
                         cwd=ROOT / "services" / service, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"[stack] migrations of {service} failed:\n{res.stdout}\n{res.stderr}")
