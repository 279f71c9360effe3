"""Nothing secret is committed: no file of the repository (tracked, or new and not ignored) holds a
password. The local stack generates its own (``.local/secrets``, ``make credentials``) and
docker-compose.yml reads them from an uncommitted ``.env``.

What counts as a password literal, by kind of file:
- a URL with a password that is not a placeholder (``{password}``, ``$(...)``, ``${...}``,
  ``<...>``, the word ``password``, ``...``);
- in configuration (compose, env files, shell, Makefile, ini, toml): a ``*PASSWORD*`` key given a
  value that is not taken from the environment (``${...}``, ``$VAR``);
- in SQL anywhere: ``PASSWORD '...'`` (but not an f-string's ``'{password}'`` or a pattern's);
- in code: an environment variable of a password read with a default;
- a role whose password is its own name (what every default used to be: ``saga_admin``,
  ``<service>_owner``, ``<service>_app``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().relative_to(ROOT).as_posix()

URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^:/@\s\"']+:(?P<password>[^@\s\"']+)@")
PLACEHOLDER = re.compile(r"^(?:[{$<].*|password|\.\.\.|…)$", re.I)
# A key at the start of a line or after a blank (not the NAME of a ``${NAME:?...}``).
CONFIG_ASSIGNMENT = re.compile(
    r"(?:^|[\s;])(?:export\s+)?\w*PASSWORD\w*\s*[:=]\s*(?P<value>\S.*?)\s*$", re.I)
# Not an f-string's ``'{password}'`` nor a regular expression's ``'([^']+)'``.
SQL_LITERAL = re.compile(r"\bPASSWORD\s+E?'(?![{(])", re.I)
DEFAULTED = re.compile(r"""(?:environ\.get|getenv)\(\s*f?["'][^"']*PASSWORD[^"']*["']\s*,""", re.I)
OWN_NAME = re.compile(r"\b(saga_admin|\w+_(?:owner|app))\b\W{1,4}\1\b")
CONFIG_SUFFIXES = {".yml", ".yaml", ".env", ".example", ".sh", ".ini", ".toml", ".cfg", ".conf"}
CONFIG_NAMES = {"Makefile", "Dockerfile", ".env"}


def _is_config(path: str) -> bool:
    p = PurePosixPath(path)
    return (p.suffix in CONFIG_SUFFIXES or p.name in CONFIG_NAMES or p.name.startswith(".env")
            or p.name.endswith(".Dockerfile"))


def literal_passwords(path: str, line: str) -> list[str]:
    """What on ``line`` of ``path`` is a password written out: an empty list when nothing is."""
    found = [f"URL with a password: {m[0]}" for m in URL.finditer(line)
             if not PLACEHOLDER.match(m["password"])]
    if _is_config(path) and not line.lstrip().startswith("#"):
        assigned = CONFIG_ASSIGNMENT.search(line)
        # Quotes around the value, escaped too (a JAAS line in a shell string: \"$pw\").
        if assigned and not assigned["value"].strip("\"'\\").startswith("$"):
            found.append(f"password given a value: {assigned[0]}")
    if SQL_LITERAL.search(line):
        found.append("SQL password literal")
    if DEFAULTED.search(line):
        found.append("password variable read with a default")
    if OWN_NAME.search(line):
        found.append("a role's own name as its password")
    return found


def _candidate_lines() -> list[tuple[str, int, str]]:
    """Lines of tracked files, and of new files git does not ignore, that could hold one."""
    res = subprocess.run(["git", "grep", "--untracked", "-n", "-I", "-i", "-E",
                          r"password|://|saga_admin|_owner|_app", "--", ".", ":!uv.lock"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert res.returncode in (0, 1), f"git grep failed: {res.stderr}"
    out = []
    for hit in res.stdout.splitlines():
        path, number, line = hit.split(":", 2)
        if path != HERE:
            out.append((path, int(number), line))
    return out


def test_no_file_of_the_repository_holds_a_password() -> None:
    lines = _candidate_lines()
    assert any(path == "docker-compose.yml" for path, _, _ in lines), "git grep found nothing"
    found = [f"{path}:{number}: {what}" for path, number, line in lines
             for what in literal_passwords(path, line)]
    assert not found, "passwords written into the repository:\n" + "\n".join(found)


@pytest.mark.parametrize(("path", "line"), [
    ("tools/local-stack/src/local_stack/settings.py",
     'PG_ADMIN_PASSWORD = os.environ.get("PG_ADMIN_PASSWORD", "saga_admin")'),
    ("tools/local-stack/src/local_stack/settings.py",
     '    return os.environ.get(f"{service.upper()}_{kind.upper()}_PASSWORD", f"{service}_{kind}")'),
    ("tools/sagactl/src/sagactl/cli.py",
     '                          "postgresql://saga_admin:saga_admin@127.0.0.1:25432/saga")'),
    ("docker-compose.yml", "      POSTGRES_PASSWORD: saga_admin"),
    ("docker-compose.yml",
     "      DATABASE_URL: postgresql+asyncpg://pedidos_app:pedidos_app@postgres:5432/saga"),
    ("docker-compose.yml", "      KAFKA_ADMIN_PASSWORD: 's3cret'"),
    ("deploy/docker/kafka/start.sh", 'jaas="... password=\\"s3cret\\";"'),
    (".env.example", "PG_ADMIN_PASSWORD=change-me"),
    ("deploy/postgres/init.sql", "CREATE ROLE pedidos_app LOGIN PASSWORD 'pedidos_app';"),
    ("deploy/postgres/init.sql", "ALTER ROLE x PASSWORD 'hunter2'"),
    ("deploy/postgres/init.sql", "ALTER ROLE x PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$a:b'"),
    ("docs/operations.md", "psql postgresql://saga_admin:hunter2@127.0.0.1:25432/saga"),
])
def test_the_check_finds_a_password_written_out(path: str, line: str) -> None:
    assert literal_passwords(path, line)


@pytest.mark.parametrize(("path", "line"), [
    ("docker-compose.yml", "      POSTGRES_PASSWORD: ${PG_ADMIN_PASSWORD:?set it in .env}"),
    ("docker-compose.yml", "      DATABASE_URL: postgresql+asyncpg://pagos_app:"
                           "${PAGOS_APP_PASSWORD:?set PAGOS_APP_PASSWORD in .env}@postgres:5432/saga"),
    ("tools/local-stack/tests/test_admin_socket_login.py",
     "    assert sql.startswith(f\"ALTER ROLE {admin} PASSWORD '{password}'\")"),
    ("tools/local-stack/tests/test_admin_socket_login.py",
     "    verifier = re.search(rf\"ROLE {role} LOGIN PASSWORD '([^']+)'\", sent)"),
    (".env.example", "PG_ADMIN_PASSWORD="),
    (".env.example", "# a comment about PG_ADMIN_PASSWORD: fill it"),
    ("deploy/local/run.sh", 'PGPASSWORD="$(cat .local/secrets/postgres-admin)" psql'),
    ("deploy/docker/kafka/start.sh",
     'scram="org.apache.kafka.common.security.scram.ScramLoginModule required '
     'username=\\"admin\\" password=\\"$admin\\";"'),
    ("tools/saga-harness/src/saga_harness/config.py",
     '    return f"postgresql://{role}:{password}@127.0.0.1:{PG_PORT}/{PG_DATABASE}"'),
    ("libs/sagakit/src/sagakit/runtime/settings.py",
     '"(postgresql+asyncpg://user:password@host:port/database), as the role"'),
    ("services/pedidos/alembic.ini", "#   DATABASE_URL=postgresql+asyncpg://pedidos_owner:"
                                     "$(cat .local/secrets/pedidos-owner)@127.0.0.1:25432/saga"),
    ("tools/local-stack/src/local_stack/postgres/database.py",
     'f"THEN CREATE ROLE {role} LOGIN PASSWORD {pw}; "'),
    ("deploy/postgres/init.sql", "SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', role, password)"),
    ("tools/local-stack/src/local_stack/passwords.py",
     '    return os.environ.get("PG_ADMIN_PASSWORD") or None'),
    ("tests/e2e/test_database_roles.py", '"SELECT 1 FROM pg_roles WHERE rolname = $1", "pedidos_app"'),
])
def test_the_check_lets_placeholders_and_the_environment_through(path: str, line: str) -> None:
    assert literal_passwords(path, line) == []
