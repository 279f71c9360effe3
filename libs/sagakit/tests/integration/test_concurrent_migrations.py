"""Replicas of a service that start together each run its migrations: two upgrades of a fresh
schema at once must both succeed, one after the other, and leave the schema at head once.

The first upgrade is held inside its migration by a lock the test holds, until the second has
reached its own wait: serialised (``sagakit.store.alembic_env``), the second waits for the
first's whole upgrade and then finds the schema at head; not serialised, it creates the version
table and the tables beside the first's, and fails when the first commits."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
import time
from pathlib import Path

import asyncpg

from saga_harness import config
from saga_harness.waiting import wait_for


def _migrations(folder: Path, schema: str) -> Path:
    """A service's migrations in miniature: the shared env.py body and one revision that
    waits at the gate before it creates the messaging tables."""
    (folder / "migrations" / "versions").mkdir(parents=True)
    (folder / "alembic.ini").write_text("[alembic]\nscript_location = %(here)s/migrations\n")
    (folder / "migrations" / "env.py").write_text(
        "from sagakit.store.alembic_env import run_migrations\n\n"
        f"run_migrations(schema={schema!r})\n")
    (folder / "migrations" / "versions" / "0001_messaging.py").write_text(textwrap.dedent(f"""
        from alembic import op

        from sagakit.store.migrations import create_messaging_tables_v1, drop_messaging_tables_v1

        revision = "0001"
        down_revision = None
        branch_labels = None
        depends_on = None


        def upgrade() -> None:
            op.execute("SELECT pg_advisory_xact_lock(hashtextextended('gate:{schema}', 0))")
            create_messaging_tables_v1(op, {schema!r})


        def downgrade() -> None:
            drop_messaging_tables_v1(op, {schema!r})
        """))
    return folder / "alembic.ini"


async def test_two_upgrades_started_at_once_on_a_fresh_schema_both_succeed(
        fresh_schema: str, tmp_path: Path) -> None:
    schema = fresh_schema
    ini = _migrations(tmp_path, schema)
    url = config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://")
    gate = await asyncpg.connect(config.admin_dsn())
    upgrades: list[asyncio.subprocess.Process] = []
    try:
        await gate.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", f"gate:{schema}")
        for n in (1, 2):
            upgrades.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "alembic", "-c", str(ini), "upgrade", "head",
                cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                env={"PATH": "/usr/bin:/bin",
                     "DATABASE_URL": f"{url}?application_name=migrate-{schema}-{n}"}))

        async def waiting() -> int:
            if any(p.returncode is not None for p in upgrades):
                return -1
            return int(await gate.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1 "
                "AND wait_event_type = 'Lock'", f"migrate-{schema}-%"))

        # Both have got as far as they can: one at the gate, the other behind it.
        await wait_for(waiting, lambda n: n in (2, -1), timeout=60,
                       what="both upgrades waiting for a lock")
        await gate.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", f"gate:{schema}")
        outputs = [(await asyncio.wait_for(p.communicate(), 60))[0].decode() for p in upgrades]
        for p, out in zip(upgrades, outputs, strict=True):
            assert p.returncode == 0, out
        versions = await gate.fetch(f"SELECT version_num FROM {schema}.alembic_version")
        assert [r["version_num"] for r in versions] == ["0001"]
        assert await gate.fetchval(f"SELECT count(*) FROM {schema}.outbox") == 0
    finally:
        for p in upgrades:
            if p.returncode is None:
                p.kill()
                await p.wait()
        await gate.close()


async def test_a_hung_migrator_gives_the_lock_up_to_the_next(
        fresh_schema: str, tmp_path: Path) -> None:
    """The first upgrade is paused (SIGSTOP) in the middle of its migration, holding the
    migration lock; the second waits for that lock. PostgreSQL ends the hung one's session once
    it has sent nothing for ``DB_MIGRATION_IDLE_TIMEOUT_S`` (3 s here), which releases the lock
    and rolls its migration back: the second upgrade runs it and succeeds."""
    schema = fresh_schema
    ini = _migrations(tmp_path, schema)
    url = config.admin_dsn().replace("postgresql://", "postgresql+asyncpg://")
    idle_s = 3.0
    gate = await asyncpg.connect(config.admin_dsn())
    upgrades: list[asyncio.subprocess.Process] = []

    async def start(n: int) -> None:
        upgrades.append(await asyncio.create_subprocess_exec(
            sys.executable, "-m", "alembic", "-c", str(ini), "upgrade", "head",
            cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", "DB_MIGRATION_IDLE_TIMEOUT_S": str(idle_s),
                 "DATABASE_URL": f"{url}?application_name=migrate-{schema}-{n}"}))

    async def waiting_for_a_lock(n: int) -> bool:
        return bool(await gate.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
            "AND wait_event_type = 'Lock'", f"migrate-{schema}-{n}"))

    try:
        await gate.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", f"gate:{schema}")
        await start(1)
        await wait_for(lambda: waiting_for_a_lock(1), bool, timeout=60,
                       what="the first upgrade inside its migration, at the gate")
        upgrades[0].send_signal(signal.SIGSTOP)
        await start(2)
        await wait_for(lambda: waiting_for_a_lock(2), bool, timeout=60,
                       what="the second upgrade waiting for the migration lock")
        # The first one's migration goes on in the database up to its next statement, which
        # its paused client never sends.
        await gate.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", f"gate:{schema}")
        released_at = time.monotonic()
        out = (await asyncio.wait_for(upgrades[1].communicate(), idle_s + 30))[0].decode()
        assert upgrades[1].returncode == 0, out
        took = time.monotonic() - released_at
        print(f"the second upgrade finished {took:.1f}s after the hung one got the gate "
              f"(its idle timeout {idle_s}s)")
        versions = await gate.fetch(f"SELECT version_num FROM {schema}.alembic_version")
        assert [r["version_num"] for r in versions] == ["0001"]

        upgrades[0].send_signal(signal.SIGCONT)
        await asyncio.wait_for(upgrades[0].communicate(), 60)
        assert upgrades[0].returncode != 0, "the hung upgrade went on after its session ended"
    finally:
        for p in upgrades:
            if p.returncode is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                await p.wait()
        await gate.close()
