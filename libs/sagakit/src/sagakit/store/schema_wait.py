"""Waits until a service's schema is at the migration head its image expects, so that a new
version's processes never run against the schema of the one before.

On Kubernetes the migration Job and the Deployments of a release are applied together; each
Deployment's pods start with this step as an init container (deploy/k8s/generate.py), under the
service's app role (it reads the version table, nothing else):

    python -m sagakit.store.schema_wait --alembic-ini services/pedidos/alembic.ini \\
        --schema pedidos --timeout 900

It logs a line each time it looks while the schema is behind (which revision it is at, which it
waits for) and exits 0 when the schema is at head, 1 when the timeout passes first (the pod then
restarts it, and says so in its events). A schema *ahead* of the image (an older image rolled
back over a newer schema) is not waited for: the migrations are additive (docs/operations.md),
so the older processes run on it, and the line says so.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import pool, text
from sqlalchemy.exc import DBAPIError, ProgrammingError

from sagakit.store.postgres_url import create_engine_for

log = logging.getLogger("sagakit.schema_wait")

ReadRevision = Callable[[], Awaitable[str | None]]


def expected_head(alembic_ini: Path) -> str:
    """The one head of the migrations shipped with this image."""
    config = Config(str(alembic_ini))
    heads = ScriptDirectory.from_config(config).get_heads()
    if len(heads) != 1:
        raise SystemExit(f"{alembic_ini}: {len(heads)} migration heads, not one")
    return str(heads[0])


def known_revisions(alembic_ini: Path) -> set[str]:
    script = ScriptDirectory.from_config(Config(str(alembic_ini)))
    return {r.revision for r in script.walk_revisions()}


def revision_reader(url: str, schema: str) -> ReadRevision:
    """Reads ``<schema>.alembic_version`` with a connection of its own each time (nothing is
    held between two looks); None while the table does not exist yet."""
    async def read() -> str | None:
        engine = create_engine_for(url, poolclass=pool.NullPool)
        try:
            async with engine.connect() as conn:
                try:
                    row = (await conn.execute(text(
                        f'SELECT version_num FROM "{schema}".alembic_version'))).first()
                except ProgrammingError:
                    return None
                return None if row is None else str(row[0])
        finally:
            await engine.dispose()
    return read


async def wait_for_head(read: ReadRevision, head: str, known: set[str], *, schema: str,
                        timeout_s: float, poll_s: float = 2.0) -> bool:
    """True once the schema is at ``head`` (or at a revision this image does not know, which is
    a newer one); False when ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            current = await read()
        except (TimeoutError, OSError, DBAPIError) as exc:
            current, reason = None, f"database unreachable ({type(exc).__name__})"
        else:
            reason = f"at {current}" if current else "not migrated yet"
        if current == head:
            log.info("schema %s is at migration head %s", schema, head)
            return True
        if current is not None and current not in known:
            log.info("schema %s is at %s, newer than this image's head %s: starting",
                     schema, current, head)
            return True
        if time.monotonic() >= deadline:
            log.error("schema %s is still %s after %.0f s; waited for migration head %s "
                      "(is the migration Job running? kubectl get jobs -l "
                      "app.kubernetes.io/component=migrations)", schema, reason, timeout_s, head)
            return False
        log.info("waiting for schema %s to reach migration head %s: %s", schema, head, reason)
        await asyncio.sleep(poll_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alembic-ini", type=Path, required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--poll", type=float, default=2.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    url = os.environ.get("DATABASE_URL")
    if not url:
        print("DATABASE_URL is not set (the service's app role URL)", file=sys.stderr)
        return 2
    head = expected_head(args.alembic_ini)
    done = asyncio.run(wait_for_head(
        revision_reader(url, args.schema), head, known_revisions(args.alembic_ini),
        schema=args.schema, timeout_s=args.timeout, poll_s=args.poll))
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
