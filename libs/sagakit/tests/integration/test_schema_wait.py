"""A service's pods wait for their schema's migration head (sagakit.store.schema_wait, the init
container of every Deployment on Kubernetes), against the stack's PostgreSQL: started before the
migrations ran, the wait says what it waits for and does not end; once ``alembic upgrade head``
has run, it ends with success. A schema that never gets there ends it with a failure, and the
line says what it waited for."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import asyncpg

from saga_harness import config
from saga_harness.waiting import wait_for


def _migrations(folder: Path, schema: str) -> Path:
    """Two revisions, the shared env.py body."""
    versions = folder / "migrations" / "versions"
    versions.mkdir(parents=True)
    (folder / "alembic.ini").write_text("[alembic]\nscript_location = %(here)s/migrations\n")
    (folder / "migrations" / "env.py").write_text(
        "from sagakit.store.alembic_env import run_migrations\n\n"
        f"run_migrations(schema={schema!r})\n")
    for revision, down in (("0001", None), ("0002", "0001")):
        (versions / f"{revision}.py").write_text(textwrap.dedent(f"""
            from alembic import op

            revision = {revision!r}
            down_revision = {down!r}
            branch_labels = None
            depends_on = None


            def upgrade() -> None:
                op.execute("CREATE TABLE {schema}.t{revision} (id int)")


            def downgrade() -> None:
                pass
            """))
    return folder / "alembic.ini"


class Output:
    """The lines a process printed so far, read as it prints them."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.lines: list[str] = []
        self.task = asyncio.create_task(self._read(process))

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            self.lines.append(line.decode().rstrip())

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)


async def _wait_process(ini: Path, schema: str, timeout: float) -> asyncio.subprocess.Process:
    url = config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://")
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sagakit.store.schema_wait", "--alembic-ini", str(ini),
        "--schema", schema, "--timeout", str(timeout), "--poll", "0.2",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": url})


async def test_the_wait_ends_when_the_migrations_reach_the_head(
        fresh_schema: str, tmp_path: Path) -> None:
    schema = fresh_schema
    ini = _migrations(tmp_path, schema)
    waiter = await _wait_process(ini, schema, timeout=120)
    out = Output(waiter)
    try:
        await wait_for(lambda: asyncio.sleep(0, out.has(
            f"waiting for schema {schema} to reach migration head 0002: not migrated yet")),
            bool, timeout=60, what="the wait saying what it waits for")
        assert waiter.returncode is None, out.lines
        upgrade = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "alembic", "-c", str(ini), "upgrade", "head",
            cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", "DATABASE_URL": config.admin_dsn().replace(
                "postgresql://", "postgresql+asyncpg://")})
        upgraded, _ = await asyncio.wait_for(upgrade.communicate(), 60)
        assert upgrade.returncode == 0, upgraded.decode()
        assert await asyncio.wait_for(waiter.wait(), 60) == 0, out.lines
        await out.task
        assert out.has(f"schema {schema} is at migration head 0002"), out.lines
    finally:
        if waiter.returncode is None:
            waiter.kill()
            await waiter.wait()


async def test_a_schema_left_behind_fails_the_wait_at_its_deadline(
        fresh_schema: str, tmp_path: Path) -> None:
    schema = fresh_schema
    ini = _migrations(tmp_path, schema)
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        await conn.execute(f"CREATE TABLE {schema}.alembic_version (version_num varchar(32))")
        await conn.execute(f"INSERT INTO {schema}.alembic_version VALUES ('0001')")
    finally:
        await conn.close()
    waiter = await _wait_process(ini, schema, timeout=2)
    out = Output(waiter)
    assert await asyncio.wait_for(waiter.wait(), 60) == 1
    await out.task
    assert out.has(f"schema {schema} is still at 0001 after 2 s; waited for migration head 0002"), \
        out.lines
