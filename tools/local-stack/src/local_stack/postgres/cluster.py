"""Starting and stopping the stack's PostgreSQL cluster: made on first use, restarted after a
crash once what the crash left behind is gone, and bootstrapped for the services each start."""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
from pathlib import Path

from local_stack.console import log
from local_stack.passwords import admin_password
from local_stack.ports import wait_port_free
from local_stack.postgres.backup import configure_archiving
from local_stack.postgres.binaries import POSTGRES_MAJOR, POSTGRES_VERSION, major_of
from local_stack.postgres.crash import clear_crashed_cluster, lock_file_line, running_postmaster
from local_stack.postgres.data_dir import pg_data_dir
from local_stack.postgres.database import bootstrap_database, keep_admin_password
from local_stack.postgres.programs import as_pg_user, pg_bin, pg_os_user, pg_ready
from local_stack.postgres.tls import make_certificates, server_options, stack_tls_files
from local_stack.processes import wait_for
from local_stack.settings import LOGS, PG_ADMIN, PG_CRASH_WAIT_S, PG_PORT, PG_TLS, RUN

# pg_ident.conf's name for "the OS user that runs the cluster may log in as the admin role".
PEER_MAP = "saga_stack"


def start_postgres() -> None:
    require_os_user()
    data = pg_data_dir()
    refuse_other_major(data)
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
        keep_admin_password(data)
        bootstrap_database()
        return
    clear_crashed_cluster(data)
    wait_port_free(PG_PORT)
    data.parent.mkdir(parents=True, exist_ok=True)
    if not (data / "PG_VERSION").exists():
        init_cluster(data)
    admit_os_user_as_admin(data, _os_user())
    # WAL archiving for point-in-time recovery, once `make backup` has made a base backup.
    configure_archiving(data)
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
                                     "-c shared_preload_libraries=pg_stat_statements "
                                     # A slow statement is logged without the values bound to
                                     # it: they can be a payment token or a customer's address.
                                     f"-c log_parameter_max_length={LOGGED_PARAMETER_LENGTH}"
                                     f"{_tls_options()}", "start"]),
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
    keep_admin_password(data)
    bootstrap_database()


def require_os_user() -> None:
    user = pg_os_user()
    if user is None:
        return
    try:
        pwd.getpwnam(user)
    except KeyError:
        raise SystemExit(f"[stack] there is no OS user {user!r} for PostgreSQL to run as (it "
                         f"refuses root): `make bootstrap-local` makes it") from None


def refuse_other_major(data: Path) -> None:
    """A cluster made by another major version cannot be started by this one's server: stop,
    saying what to do, rather than let ``pg_ctl`` fail on it."""
    made_by = major_of(data)
    if made_by is not None and made_by != POSTGRES_MAJOR:
        raise SystemExit(
            f"[stack] the cluster in {data} was made by PostgreSQL {made_by}, and the stack runs "
            f"{POSTGRES_VERSION} (deploy/postgres-version): `make down`, then remove {data} "
            f"(the stack makes it again; its rows are lost) or move it aside, then `make up`")


def _tls_options() -> str:
    """With SAGA_PG_TLS=1, the options that turn TLS on (its CA and certificate made on first
    use, the server's key the cluster user's own); nothing otherwise."""
    if not PG_TLS:
        return ""
    user = pg_os_user()
    owner = (pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid) if user else None
    files = make_certificates(stack_tls_files().ca_cert.parent, owner=owner)
    log(f"PostgreSQL speaks TLS (SAGA_PG_TLS=1); its CA: {files.ca_cert}")
    return " " + server_options(files)


def init_cluster(data: Path) -> None:
    """A new cluster in ``data``, owned by the user PostgreSQL runs as, listening on 127.0.0.1."""
    log(f"initialising PostgreSQL cluster in {data}")
    user = pg_os_user()
    data.mkdir(parents=True, exist_ok=True)
    pwfile = data.parent / "pwfile"
    pwfile.unlink(missing_ok=True)  # left by an initdb that failed: made anew, private
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(admin_password() + "\n")
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


# Bind parameters in the statements PostgreSQL logs (log_min_duration_statement): none.
LOGGED_PARAMETER_LENGTH = 0


def _os_user() -> str:
    return pg_os_user() or pwd.getpwuid(os.geteuid()).pw_name


def admit_os_user_as_admin(data: Path, os_user: str) -> None:
    """Lets ``os_user``, the OS user the cluster runs as, log in as the admin role over the
    cluster's Unix socket (peer authentication through a pg_ident map), before PostgreSQL
    starts and reads these files.

    That way in is what makes the admin password the stack's to choose on every start
    (database.keep_admin_password): a cluster made before the stack generated its passwords
    still has the old committed default, and one whose ``.local/secrets`` was removed has a
    password nobody kept. The socket lives in the data directory (0700), so only who can read
    the data anyway can use it. Added to a cluster made earlier too; harmless when present.
    """
    rule = f"local all {PG_ADMIN} peer map={PEER_MAP}"
    hba = data / "pg_hba.conf"
    text = hba.read_text()
    if rule not in text.splitlines():
        hba.write_text(f"# saga local stack: the admin over the socket (cluster.py)\n{rule}\n{text}")
    mapping = f"{PEER_MAP} {os_user} {PG_ADMIN}"
    ident = data / "pg_ident.conf"
    text = ident.read_text() if ident.exists() else ""
    if mapping not in text.splitlines():
        ident.write_text(f"{text.rstrip()}\n{mapping}\n".lstrip())


def stop_postgres(mode: str = "fast") -> None:
    data = pg_data_dir()
    if (data / "postmaster.pid").exists():
        subprocess.run(as_pg_user([pg_bin("pg_ctl"), "-D", str(data), "-m", mode, "-w", "stop"]),
                       capture_output=True)
