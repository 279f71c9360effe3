"""The database every service shares, and in it each service's schema, roles and migrations:
an owner role runs the migrations, an app role is what the service runs as. Each service also
publishes read views in a schema of its own (``<service>_read``, made by its migrations) to a
group role ``<service>_reader``, which the readers' login roles (``console_reader``,
``sagactl_reader``, ``grafana_reader``) are members of."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from local_stack.passwords import (
    READERS,
    admin_password,
    reader_password,
    reader_role,
    role_password,
)
from local_stack.postgres import scram
from local_stack.postgres.programs import as_pg_user, pg_bin
from local_stack.postgres.tls import with_stack_tls
from local_stack.registry.server import ROLE as REGISTRY_ROLE
from local_stack.registry.server import SCHEMA as REGISTRY_SCHEMA
from local_stack.registry.server import database_password as registry_database_password
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


def _login_role(role: str, password: str) -> str:
    # Set again on every start: the password of a role made earlier (with another password,
    # or the old committed default) becomes the one the stack keeps.
    pw = _password(password)
    return (f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') "
            f"THEN CREATE ROLE {role} LOGIN PASSWORD {pw}; "
            f"ELSE ALTER ROLE {role} LOGIN PASSWORD {pw}; END IF; END $$")


def bootstrap_database() -> None:
    """One database; per service a schema, an owner role (migrations), an app role (runtime), a
    read schema and its group role; a login role per reader of the read views; the schema
    registry's schema and role."""
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
            statements.append(_login_role(role, role_password(svc, kind)))
            statements.append(f"GRANT CONNECT ON DATABASE {PG_DB} TO {role}")
            statements.append(f"ALTER ROLE {role} SET search_path = {svc}")
        statements += [
            f"CREATE SCHEMA IF NOT EXISTS {svc} AUTHORIZATION {owner}",
            f"GRANT USAGE ON SCHEMA {svc} TO {app}",
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {svc} "
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {app}",
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {svc} "
            f"GRANT USAGE, SELECT ON SEQUENCES TO {app}",
            # The read views' schema (its owner's, so that the migrations need no right to
            # create schemas) and the group role they are granted to, which cannot log in.
            f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{svc}_reader') "
            f"THEN CREATE ROLE {svc}_reader NOLOGIN; END IF; END $$",
            f"CREATE SCHEMA IF NOT EXISTS {svc}_read AUTHORIZATION {owner}",
            f"GRANT USAGE ON SCHEMA {svc}_read TO {svc}_reader",
        ]
    # The schema registry's schema, owned by the role it runs as: Apicurio makes and upgrades
    # its tables itself as it starts (local_stack.registry.server).
    statements += [
        _login_role(REGISTRY_ROLE, registry_database_password()),
        f"GRANT CONNECT ON DATABASE {PG_DB} TO {REGISTRY_ROLE}",
        f"ALTER ROLE {REGISTRY_ROLE} SET search_path = {REGISTRY_SCHEMA}",
        f"CREATE SCHEMA IF NOT EXISTS {REGISTRY_SCHEMA} AUTHORIZATION {REGISTRY_ROLE}",
    ]
    for consumer in READERS:
        role = reader_role(consumer)
        statements += [_login_role(role, reader_password(consumer)),
                       f"GRANT CONNECT ON DATABASE {PG_DB} TO {role}",
                       *(f"GRANT {svc}_reader TO {role}" for svc in SERVICE_PORTS)]
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
