"""DBOS as each process of the peer runs it: one configuration, the settings changed from
DBOS's defaults named and explained in docs/benchmarks.md."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, DBOSConfig

from peer_dbos.settings import QUEUE, PeerSettings
from peer_dbos.tables import DDL

# Every process of the peer runs the same code: one version, so that a queue worker dequeues
# what the API process enqueued and any process may recover another's workflows.
APP_VERSION = "peer-dbos-1"


def system_url(settings: PeerSettings) -> str:
    return settings.database_url.replace("postgresql://", "postgresql+psycopg://", 1)


def create_tables(settings: PeerSettings) -> None:
    """The peer's schema, made once by the process that starts the others (several processes
    creating it at once would race in PostgreSQL's catalogue)."""
    engine = sa.create_engine(system_url(settings))
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(DDL)
    finally:
        engine.dispose()


def migrate_system_tables(settings: PeerSettings) -> None:
    """DBOS's system tables, made and migrated once by ``dbos migrate`` before any process of
    the shape starts, the way DBOS's docs deploy an application. Left to the processes, the
    queue shape's API process (a ``DBOSClient``, which never migrates) could enqueue while its
    worker was still migrating, into a table without its newest columns."""
    dbos = Path(sys.executable).with_name("dbos")
    done = subprocess.run([str(dbos), "migrate", "--sys-db-url", system_url(settings),
                           "--schema", settings.system_schema],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        output = f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
        password = sa.make_url(settings.database_url).password
        if password:  # the URL may be echoed: never its password
            output = output.replace(password, "***")
        raise SystemExit(f"dbos migrate failed:\n{output}")


def config(settings: PeerSettings) -> DBOSConfig:
    return {
        "name": "peer-dbos",
        "system_database_url": system_url(settings),
        "dbos_system_schema": settings.system_schema,
        "sys_db_pool_size": settings.system_pool_size,
        "max_executor_threads": settings.executor_threads,
        "application_version": APP_VERSION,
        # Each process its own executor: a process recovers only its own unfinished
        # workflows at launch, never those of a sibling still running them.
        "executor_id": f"peer-{os.getpid()}",
        "log_level": "WARNING",
    }


def launch(settings: PeerSettings, *, queue_worker: bool = False
           ) -> Callable[[dict[str, Any]], str]:
    """Registers the saga, then launches DBOS (and, for a queue worker, its queue); returns
    the workflow."""
    from peer_dbos.saga import register

    workflow = register(settings)
    launch_registered(settings)
    if queue_worker:
        DBOS.register_queue(QUEUE, polling_interval_sec=settings.queue_polling_interval_s,
                            worker_concurrency=settings.executor_threads,
                            on_conflict="always_update")
    return workflow


def launch_registered(settings: PeerSettings) -> None:
    """Launches DBOS once the saga's style has registered its workflow."""
    DBOS(config=config(settings))
    DBOS.launch()
