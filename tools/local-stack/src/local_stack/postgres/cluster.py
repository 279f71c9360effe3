"""Starting and stopping the stack's PostgreSQL cluster: made on first use, restarted after a
crash once what the crash left behind is gone, and bootstrapped for the services each start."""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
from pathlib import Path

from local_stack.console import log
from local_stack.ports import wait_port_free
from local_stack.postgres.crash import clear_crashed_cluster, lock_file_line, running_postmaster
from local_stack.postgres.data_dir import pg_data_dir
from local_stack.postgres.database import bootstrap_database
from local_stack.postgres.programs import as_pg_user, pg_bin, pg_os_user, pg_ready
from local_stack.processes import wait_for
from local_stack.settings import LOGS, PG_ADMIN, PG_ADMIN_PASSWORD, PG_CRASH_WAIT_S, PG_PORT, RUN


def start_postgres() -> None:
    data = pg_data_dir()
    postmaster = running_postmaster(data)
    if postmaster is not None:
        port = lock_file_line(data / "postmaster.pid", 3)
        if port != str(PG_PORT):
            raise SystemExit(f"[stack] this stack's PostgreSQL (pid {postmaster}) listens on port "
                             f"{port}, not PG_PORT={PG_PORT}: `make down` then `make up` moves "
                             f"it (or set PG_PORT={port})")
        if pg_ready():
            return
        # Started by someone else a moment ago, or still replaying WAL after a crash.
        log(f"PostgreSQL (pid {postmaster}) is starting; waiting for it")
        wait_for("PostgreSQL", pg_ready, PG_CRASH_WAIT_S, "postgres")
        bootstrap_database()
        return
    clear_crashed_cluster(data)
    wait_port_free(PG_PORT)
    data.parent.mkdir(parents=True, exist_ok=True)
    if not (data / "PG_VERSION").exists():
        init_cluster(data)
    LOGS.mkdir(parents=True, exist_ok=True)
    pg_log = data.parent / "postgres.log"
    log(f"starting PostgreSQL on 127.0.0.1:{PG_PORT}")
    logged_before = pg_log.stat().st_size if pg_log.exists() else 0
    # Commit timestamps let the benchmark split each hop at the commits themselves (commit →
    # broker acknowledgement → consumer's transaction → its commit); a few bytes per commit.
    # pg_stat_statements tells which statements PostgreSQL's time goes to (the benchmark's
    # profile, bench/pg_statements.py); it found the allocation scanning the whole catalogue.
    # The port is given here too, over the one initdb wrote: PG_PORT decides, also for a
    # cluster made with another port.
    res = subprocess.run(as_pg_user([pg_bin("pg_ctl"), "-D", str(data), "-l", str(pg_log), "-w",
                                     "-t", "60", "-o", f"-c port={PG_PORT} "
                                     "-c track_commit_timestamp=on "
                                     "-c shared_preload_libraries=pg_stat_statements", "start"]),
                         capture_output=True, text=True)
    if res.returncode != 0:
        with pg_log.open("rb") as f:
            f.seek(logged_before)
            said = f.read().decode(errors="replace")[-3000:]
        raise SystemExit(f"[stack] PostgreSQL did not start: {res.stdout.strip()} "
                         f"{res.stderr.strip()}\n{said}")
    link = LOGS / "postgres.log"
    # A cluster made elsewhere before (another data folder) leaves a link to its old log.
    if not link.is_symlink() or link.readlink() != pg_log:
        with contextlib.suppress(OSError):
            link.unlink(missing_ok=True)
            link.symlink_to(pg_log)
    (RUN / "postgres.datadir").parent.mkdir(parents=True, exist_ok=True)
    (RUN / "postgres.datadir").write_text(str(data))
    wait_for("PostgreSQL", pg_ready, 30, "postgres")
    bootstrap_database()


def init_cluster(data: Path) -> None:
    """A new cluster in ``data``, owned by the user PostgreSQL runs as, listening on 127.0.0.1."""
    log(f"initialising PostgreSQL cluster in {data}")
    user = pg_os_user()
    data.mkdir(parents=True, exist_ok=True)
    pwfile = data.parent / "pwfile"
    pwfile.write_text(PG_ADMIN_PASSWORD + "\n")
    if user:
        uid = pwd.getpwnam(user)
        for p in (data.parent, data, pwfile):
            os.chown(p, uid.pw_uid, uid.pw_gid)
    os.chmod(data, 0o700)
    subprocess.run(as_pg_user([pg_bin("initdb"), "-D", str(data), "-U", PG_ADMIN,
                               f"--pwfile={pwfile}", "--auth-host=scram-sha-256",
                               "--auth-local=peer", "-E", "UTF8", "--locale=C.UTF-8"]),
                   check=True, capture_output=True)
    pwfile.unlink()
    conf = data / "postgresql.conf"
    with conf.open("a") as f:
        f.write(
            "\n# saga local stack\n"
            f"listen_addresses = '127.0.0.1'\nport = {PG_PORT}\n"
            f"unix_socket_directories = '{data}'\n"
            "max_connections = 200\nshared_buffers = 256MB\n"
            "lock_timeout = 0\nlog_min_duration_statement = 1000\n"
        )


def stop_postgres(mode: str = "fast") -> None:
    data = pg_data_dir()
    if (data / "postmaster.pid").exists():
        subprocess.run(as_pg_user([pg_bin("pg_ctl"), "-D", str(data), "-m", mode, "-w", "stop"]),
                       capture_output=True)
