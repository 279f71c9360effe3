"""The local stack without Docker: PostgreSQL, Kafka (KRaft), the fake gateway and the services.

    python deploy/local/stack.py up|down|status|logs|run|restart PART|kill PART

Every part runs as a process of its own, in its own process group, with its log under
``$SAGA_STATE_DIR/logs`` and its pid under ``$SAGA_STATE_DIR/run``. ``up`` is idempotent:
a part that already answers its health check is left alone. ``down`` stops every part and
then checks that none of their processes is left.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from netproxy import layout as proxy_ports  # the TCP proxy's ports, shared with the chaos suite

ROOT = Path(__file__).resolve().parents[2]

STATE = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local")).resolve()
LOGS = STATE / "logs"
RUN = STATE / "run"
KAFKA_DIR = Path(os.environ.get("SAGA_KAFKA_HOME", STATE / "kafka"))

# Below Linux's ephemeral range (32768-60999) and the IANA dynamic range (49152-65535): a port
# in it can be taken by any outgoing connection, even a service's own reconnect to it while
# PostgreSQL is down (a TCP self-connect), and then PostgreSQL cannot bind it for a minute.
PG_PORT = int(os.environ.get("PG_PORT", "25432"))
PG_DB = os.environ.get("PG_DATABASE", "saga")
PG_ADMIN = os.environ.get("PG_ADMIN_USER", "saga_admin")
PG_ADMIN_PASSWORD = os.environ.get("PG_ADMIN_PASSWORD", "saga_admin")
KAFKA_PORT = int(os.environ.get("KAFKA_PORT", "9092"))
KAFKA_CONTROLLER_PORT = int(os.environ.get("KAFKA_CONTROLLER_PORT", "9093"))
GATEWAY_PORT = int(os.environ.get("GATEWAY_PORT", "8010"))
SERVICE_PORTS = {
    "pedidos": int(os.environ.get("PEDIDOS_PORT", "8001")),
    "inventario": int(os.environ.get("INVENTARIO_PORT", "8002")),
    "pagos": int(os.environ.get("PAGOS_PORT", "8003")),
}
PROMETHEUS_PORT = int(os.environ.get("PROMETHEUS_PORT", "9090"))
KAFKA_BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"
# SAGA_NETPROXY=1: every service reaches PostgreSQL, Kafka and the gateway through the TCP proxy
# of tools/netproxy, which the chaos suite drives to add latency, black holes and resets.
NETPROXY = os.environ.get("SAGA_NETPROXY") == "1"
TOPIC_PARTITIONS = int(os.environ.get("KAFKA_TOPIC_PARTITIONS", "6"))
UP_DEADLINE_S = float(os.environ.get("STACK_UP_TIMEOUT", "120"))
# How long ``up`` waits for what a crashed PostgreSQL left behind (its orphaned backends, the
# port) before it gives up.
PG_CRASH_WAIT_S = float(os.environ.get("STACK_PG_CRASH_WAIT", "60"))


def log(msg: str) -> None:
    print(f"[stack] {msg}", flush=True)


def service_role_password(service: str, kind: str) -> str:
    return os.environ.get(f"{service.upper()}_{kind.upper()}_PASSWORD", f"{service}_{kind}")


def dsn(user: str, password: str, driver: str = "postgresql+asyncpg", port: int = PG_PORT) -> str:
    return f"{driver}://{user}:{password}@127.0.0.1:{port}/{PG_DB}"


# ---------------------------------------------------------------- process helpers


def pid_file(part: str) -> Path:
    return RUN / f"{part}.pid"


def read_pid(part: str) -> int | None:
    try:
        return int(pid_file(part).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) == 0


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return bool(200 <= resp.status < 300)
    except Exception:
        return False


# A part's log is moved aside (one older generation kept, ``<part>.log.1``) when the part
# starts and the log has grown past this: a day of benchmarks wrote 930 MB into pedidos' log.
LOG_ROTATE_BYTES = int(os.environ.get("STACK_LOG_ROTATE_MB", "200")) * 2**20


def open_log(part: str, logs: Path = LOGS, limit: int = LOG_ROTATE_BYTES) -> BinaryIO:
    path = logs / f"{part}.log"
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_size > limit:
            path.replace(logs / f"{part}.log.1")
    return open(path, "ab")


def spawn(part: str, argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> int:
    LOGS.mkdir(parents=True, exist_ok=True)
    RUN.mkdir(parents=True, exist_ok=True)
    logf = open_log(part)
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=logf,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    pid_file(part).write_text(str(proc.pid))
    return proc.pid


def stop_group(part: str, sig: int = signal.SIGTERM, grace_s: float = 15.0) -> None:
    pid = read_pid(part)
    if alive(pid):
        assert pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + grace_s
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            log(f"{part} did not stop in {grace_s:.0f}s, killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            while alive(pid):
                time.sleep(0.05)
        # Reap it if we are its parent (restart within one stack.py process).
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    pid_file(part).unlink(missing_ok=True)


def wait_for(what: str, check: Callable[[], bool], deadline_s: float, part: str) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if check():
            return
        pid = read_pid(part)
        if part != "postgres" and pid is not None and not alive(pid):
            tail = (LOGS / f"{part}.log").read_text(errors="replace")[-3000:]
            raise SystemExit(f"[stack] {part} exited while starting; last log lines:\n{tail}")
        time.sleep(0.2)
    raise SystemExit(f"[stack] {part} did not come up: {what} not ready after {deadline_s:.0f}s "
                     f"(see {LOGS / (part + '.log')})")


# ---------------------------------------------------------------- PostgreSQL


def pg_bin(name: str) -> str:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    for c in reversed(candidates):
        if (c / name).exists():
            return str(c / name)
    found = shutil.which(name)
    if not found:
        raise SystemExit(f"[stack] PostgreSQL binary {name} not found: run deploy/local/bootstrap.sh")
    return found


def pg_os_user() -> str | None:
    """PostgreSQL refuses to run as root: under root the cluster belongs to 'postgres'."""
    return "postgres" if os.geteuid() == 0 else None


def as_pg_user(argv: list[str]) -> list[str]:
    user = pg_os_user()
    return ["runuser", "-u", user, "--", *argv] if user else argv


def pg_data_dir() -> Path:
    """The cluster's folder: under the state dir when the postgres user can reach it.

    The choice is made once and remembered in the state dir, so that ``down`` always finds the
    cluster that ``up`` started.
    """
    STATE.mkdir(parents=True, exist_ok=True)
    remembered = STATE / "pg.location"
    if remembered.exists():
        return Path(remembered.read_text().strip())
    chosen = STATE / "pg"
    user = pg_os_user()
    if user is not None:
        probe = subprocess.run(["runuser", "-u", user, "--", "test", "-x", str(STATE)],
                               capture_output=True)
        if probe.returncode != 0:
            # The checkout lives where the postgres user cannot go (a private temp dir):
            # keep the cluster in a folder of its own, named after the checkout.
            tag = hashlib.sha1(str(ROOT).encode()).hexdigest()[:10]
            chosen = Path(f"/var/tmp/saga-choreography-{tag}/pg")
    remembered.write_text(str(chosen))
    return chosen


def pg_ready() -> bool:
    return subprocess.run([pg_bin("pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(PG_PORT)],
                          capture_output=True).returncode == 0


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
    user = pg_os_user()
    if not (data / "PG_VERSION").exists():
        log(f"initialising PostgreSQL cluster in {data}")
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


# A postmaster killed outright (SIGKILL, the OOM killer) leaves behind its lock files, its
# shared memory and its backends, each of which exits only when it notices (a backend in the
# middle of a statement finishes it first). A new postmaster refuses to start while the old
# one's pid is alive (a zombie not yet reaped by its new parent counts) or while the old
# shared memory is still attached, and then cannot bind its port while a socket holds it.
# ``up`` waits for all of that, for this cluster only: its processes are the postgres
# processes whose working directory is its data directory, which no other cluster shares.


def lock_file_line(path: Path, index: int) -> str | None:
    """A line of a PostgreSQL lock file: the pid first; in postmaster.pid the port fourth and
    the key and id of the postmaster's SysV shared memory segment seventh."""
    try:
        return path.read_text().splitlines()[index].strip()
    except (OSError, IndexError):
        return None


def lock_file_pid(path: Path) -> int | None:
    line = lock_file_line(path, 0)
    return int(line) if line and line.isdigit() else None


def lock_file_shmid(path: Path) -> int | None:
    line = lock_file_line(path, 6)
    return int(line.split()[1]) if line and len(line.split()) == 2 else None


def is_cluster_process(pid: int, data: Path) -> bool:
    try:
        if Path(os.readlink(f"/proc/{pid}/cwd")) != data.resolve():
            return False
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    # A binary replaced by a package upgrade reads "…/postgres (deleted)".
    return Path(exe.split(" (deleted)")[0]).name == "postgres" and alive(pid)


def cluster_processes(data: Path) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir()
            if p.name.isdigit() and is_cluster_process(int(p.name), data)]


def running_postmaster(data: Path) -> int | None:
    pid = lock_file_pid(data / "postmaster.pid")
    return pid if pid is not None and is_cluster_process(pid, data) else None


def shm_attachments(shmid: int | None) -> int:
    if shmid is None:
        return 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]:
            cols = line.split()
            if int(cols[1]) == shmid:
                return int(cols[6])
    return 0


def describe(pids: list[int]) -> str:
    def cmd(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()
        except OSError:
            return "?"
    return ", ".join(f"{pid} ({cmd(pid)})" for pid in pids)


def clear_crashed_cluster(data: Path, deadline_s: float = PG_CRASH_WAIT_S) -> None:
    """Waits until nothing of a crashed postmaster of ``data`` is left, then removes the lock
    files it left (PostgreSQL itself would, were the old pid not a zombie)."""
    lock = data / "postmaster.pid"
    dead = lock_file_pid(lock)
    if dead is None:
        return
    shmid = lock_file_shmid(lock)
    deadline = time.monotonic() + deadline_s
    told = False
    while True:
        left = cluster_processes(data)
        attached = shm_attachments(shmid)
        if not left and not attached:
            break
        if time.monotonic() > deadline:
            raise SystemExit(
                f"[stack] PostgreSQL cannot start: its postmaster (pid {dead}) died, and after "
                f"{deadline_s:.0f}s processes of the cluster in {data} still run: "
                f"{describe(left) or '-'} (its shared memory has {attached} attachments). "
                "They exit once they notice"
                + (f"; to hurry them: kill -QUIT {' '.join(map(str, left))}" if left else ""))
        if not told:
            log(f"PostgreSQL's postmaster (pid {dead}) is gone; waiting up to {deadline_s:.0f}s "
                f"for the {len(left)} process(es) it left to exit: {describe(left)}")
            told = True
        time.sleep(0.1)
    for stale in (lock, *data.glob(".s.PGSQL.*.lock")):
        # Only the lock files of the dead postmaster: a fresh one is someone else's start.
        if lock_file_pid(stale) == dead:
            log(f"removing {stale.name} left by the dead postmaster (pid {dead})")
            stale.unlink(missing_ok=True)


def ephemeral_ports() -> tuple[int, int] | None:
    with contextlib.suppress(OSError, ValueError):
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    return None


def port_bindable(port: int) -> bool:
    """Whether PostgreSQL could bind the port now: it sets SO_REUSEADDR too, so a socket of its
    own in TIME-WAIT does not count; a client's socket on that port (in any state) does."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


TCP_STATES = {"01": "ESTABLISHED", "02": "SYN-SENT", "03": "SYN-RECV", "04": "FIN-WAIT-1",
              "05": "FIN-WAIT-2", "06": "TIME-WAIT", "07": "CLOSE", "08": "CLOSE-WAIT",
              "09": "LAST-ACK", "0A": "LISTEN", "0B": "CLOSING"}


def port_sockets(port: int) -> list[tuple[str, str, list[int]]]:
    """(state, peer, pids) of every TCP socket whose local port is ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if int(cols[1].rsplit(":", 1)[1], 16) == port:
                    found.append((TCP_STATES.get(cols[3], cols[3]), cols[2], cols[9]))
    if not found:
        return []
    owners: dict[str, list[int]] = {}
    inodes = {inode for _, _, inode in found if inode != "0"}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or not inodes:
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:[") and target[8:-1] in inodes:
                        owners.setdefault(target[8:-1], []).append(int(proc.name))
    return [(state, peer, owners.get(inode, [])) for state, peer, inode in found]


def refuse_taken_port(port: int, part: str) -> None:
    """Fails, naming the port and the program, when something that is not this stack's part
    (stopped just before) listens on the part's port: otherwise the part would fail to bind
    and the health check would be answered by the other program."""
    listeners = sorted({pid for state, _, pids in port_sockets(port) if state == "LISTEN"
                        for pid in pids})
    if listeners or (not port_bindable(port) and port_open(port)):
        raise SystemExit(f"[stack] port 127.0.0.1:{port} ({part}) is taken by another program: "
                         f"{describe(listeners) or 'unknown pid'}; stop it or move {part} to "
                         "another port (see docs/configuration.md)")


def wait_port_free(port: int, deadline_s: float = PG_CRASH_WAIT_S) -> None:
    """Fails at once when another program listens on the port; waits, up to a deadline, for
    connections that merely hold it (a client that happened to connect from it) to go."""
    deadline = time.monotonic() + deadline_s
    told = False
    while not port_bindable(port):
        held = port_sockets(port)
        if any(state == "LISTEN" for state, _, _ in held):
            listeners = [pid for state, _, pids in held if state == "LISTEN" for pid in pids]
            raise SystemExit(f"[stack] port 127.0.0.1:{port} (PG_PORT) is taken by another "
                             f"program: {describe(sorted(set(listeners))) or 'unknown pid'}; "
                             "stop it or choose another PG_PORT")
        summary = ", ".join(f"a {state} socket of {describe(pids) or 'no process'}"
                            for state, _, pids in held) or "a socket not in /proc/net"
        if time.monotonic() > deadline:
            raise SystemExit(f"[stack] port 127.0.0.1:{port} (PG_PORT) is still held after "
                             f"{deadline_s:.0f}s: {summary}")
        if not told:
            told = True
            ephemeral = ephemeral_ports()
            hint = (f"; it lies in the kernel's ephemeral range {ephemeral[0]}-{ephemeral[1]}, "
                    "where any outgoing connection can take it: choose a PG_PORT outside it"
                    if ephemeral and ephemeral[0] <= port <= ephemeral[1] else "")
            log(f"port 127.0.0.1:{port} (PG_PORT) is held by {summary}; waiting up to "
                f"{deadline_s:.0f}s for it{hint}")
        time.sleep(0.2)


def stop_postgres(mode: str = "fast") -> None:
    data = pg_data_dir()
    if (data / "postmaster.pid").exists():
        subprocess.run(as_pg_user([pg_bin("pg_ctl"), "-D", str(data), "-m", mode, "-w", "stop"]),
                       capture_output=True)


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


# ---------------------------------------------------------------- Kafka


def kafka_libs() -> Path:
    libs = KAFKA_DIR / "libs"
    marker = libs / ".complete"
    pom = ROOT / "deploy/local/kafka/pom.xml"
    stamp = hashlib.sha1(pom.read_bytes()).hexdigest()
    if marker.exists() and marker.read_text() == stamp:
        return libs
    log("fetching Apache Kafka from Maven Central (first run only)")
    shutil.rmtree(libs, ignore_errors=True)
    libs.mkdir(parents=True)
    subprocess.run(["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                    f"-DoutputDirectory={libs}", "-DincludeScope=runtime"], check=True)
    marker.write_text(stamp)
    return libs


def kafka_config() -> Path:
    data = KAFKA_DIR / "data"
    data.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "deploy/local/kafka/server.properties").read_text()
    # One extra listener per service, advertised at that service's proxy port: a client that
    # bootstraps through the proxy keeps using it for the broker connections that follow.
    proxied = [(proxy_ports.kafka_listener_name(svc), proxy_ports.kafka_listener_port(svc),
                proxy_ports.route_port(svc, "kafka")) for svc in proxy_ports.SERVICES]
    for k, v in {"${KAFKA_PORT}": str(KAFKA_PORT), "${CONTROLLER_PORT}": str(KAFKA_CONTROLLER_PORT),
                 "${KAFKA_DATA}": str(data),
                 "${PROXIED_LISTENERS}": "".join(f",{n}://127.0.0.1:{p}" for n, p, _ in proxied),
                 "${PROXIED_ADVERTISED}": "".join(f",{n}://127.0.0.1:{a}" for n, _, a in proxied),
                 "${PROXIED_PROTOCOLS}": "".join(f",{n}:PLAINTEXT" for n, _, _ in proxied)}.items():
        text = text.replace(k, v)
    conf = KAFKA_DIR / "server.properties"
    conf.write_text(text)
    return conf


def java_cmd(libs: Path, main: str, *args: str, heap: str = "-Xmx512m") -> list[str]:
    # C1 only (no C2): on two cores shared with the rest of the stack, C2 spent 5-20 % of a
    # core recompiling the broker's request paths for minutes after every start (a third of
    # the broker's CPU at 10 orders/s), for ~0.7 ms less broker CPU per saga once warm.
    return ["java", heap, "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={ROOT / 'deploy/local/kafka/log4j2.properties'}",
            "-cp", f"{libs}/*", main, *args]


def start_kafka() -> None:
    if port_open(KAFKA_PORT) and alive(read_pid("kafka")):
        return
    stop_group("kafka", grace_s=30)
    refuse_taken_port(KAFKA_PORT, "kafka")
    libs = kafka_libs()
    conf = kafka_config()
    if not (KAFKA_DIR / "data" / "meta.properties").exists():
        cluster_id = "c2FnYS1sb2NhbC1zdGFjaw"  # fixed: one local cluster per state dir
        subprocess.run(java_cmd(libs, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                                "-c", str(conf), "--ignore-formatted"),
                       check=True, capture_output=True)
    log(f"starting Kafka on {KAFKA_BOOTSTRAP}")
    spawn("kafka", java_cmd(libs, "kafka.Kafka", str(conf)), dict(os.environ))
    wait_for("Kafka", lambda: port_open(KAFKA_PORT), 90, "kafka")
    asyncio.run(create_topics())


async def create_topics() -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import KafkaError

    from saga_contracts.topics import ALL_TOPICS

    deadline = time.monotonic() + 60
    while True:
        admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP, request_timeout_ms=5000)
        try:
            await admin.start()
            existing = set(await admin.list_topics())
            missing = [t for t in ALL_TOPICS if t not in existing]
            if missing:
                await admin.create_topics([
                    NewTopic(t, num_partitions=TOPIC_PARTITIONS, replication_factor=1,
                             topic_configs={"min.insync.replicas": "1",
                                            "unclean.leader.election.enable": "false"})
                    for t in missing
                ])
                log(f"created topics {', '.join(missing)}")
            return
        except KafkaError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"[stack] could not create Kafka topics: {exc!r}") from exc
            await asyncio.sleep(0.5)
        finally:
            await admin.close()


# ---------------------------------------------------------------- Python processes


@dataclass
class PyPart:
    name: str
    module: str
    port: int
    env: dict[str, str] = field(default_factory=dict)

    def health_url(self) -> str:
        path = "/ready" if self.name in SERVICE_PORTS else "/health"
        return f"http://127.0.0.1:{self.port}{path}"


def service_env(service: str) -> dict[str, str]:
    env = {
        "SERVICE_NAME": service,
        "HTTP_HOST": "127.0.0.1",
        "HTTP_PORT": str(SERVICE_PORTS[service]),
        "DATABASE_URL": dsn(f"{service}_app", service_role_password(service, "app")),
        "KAFKA_BOOTSTRAP_SERVERS": KAFKA_BOOTSTRAP,
        "GATEWAY_URL": f"http://127.0.0.1:{GATEWAY_PORT}",
    }
    if NETPROXY:
        env["DATABASE_URL"] = dsn(f"{service}_app", service_role_password(service, "app"),
                                  port=proxy_ports.route_port(service, "postgres"))
        env["KAFKA_BOOTSTRAP_SERVERS"] = f"127.0.0.1:{proxy_ports.route_port(service, 'kafka')}"
        if service == "pagos":
            env["GATEWAY_URL"] = f"http://127.0.0.1:{proxy_ports.route_port(service, 'gateway')}"
    return env


def py_parts() -> list[PyPart]:
    gateway = PyPart("gateway", "fake_gateway", GATEWAY_PORT, {
        "GATEWAY_PORT": str(GATEWAY_PORT),
        "GATEWAY_LEDGER_PATH": str(STATE / "gateway" / "ledger.sqlite3"),
    })
    services = [PyPart(s, s, p, service_env(s)) for s, p in SERVICE_PORTS.items()]
    return [gateway, *([NETPROXY_PART] if NETPROXY else []), *services]


NETPROXY_PART = PyPart("netproxy", "netproxy", proxy_ports.CONTROL_PORT,
                       {"PG_PORT": str(PG_PORT), "GATEWAY_PORT": str(GATEWAY_PORT)})


def start_py(part: PyPart, wait: bool = True) -> None:
    """``wait=False`` (chaos restarts): no migrations, no health wait; the part must recover
    by itself while other parts may still be down."""
    if alive(read_pid(part.name)) and http_ok(part.health_url()):
        return
    stop_group(part.name)
    refuse_taken_port(part.port, part.name)
    if wait and part.name in SERVICE_PORTS:
        migrate(part.name)
    env = {**os.environ, **part.env, "PYTHONUNBUFFERED": "1"}
    spawn(part.name, [sys.executable, "-m", part.module], env)
    if wait:
        wait_for(part.health_url(), lambda: http_ok(part.health_url()), 60, part.name)


# ---------------------------------------------------------------- Prometheus (optional)


def start_prometheus() -> None:
    binary = shutil.which("prometheus")
    if not binary or alive(read_pid("prometheus")):
        return
    data = STATE / "prometheus"
    data.mkdir(parents=True, exist_ok=True)
    log(f"starting Prometheus on 127.0.0.1:{PROMETHEUS_PORT}")
    spawn("prometheus", [binary, f"--config.file={ROOT / 'deploy/prometheus/prometheus.yml'}",
                         f"--storage.tsdb.path={data}",
                         f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"], dict(os.environ))
    wait_for("Prometheus", lambda: http_ok(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready"), 30,
             "prometheus")


# ---------------------------------------------------------------- commands

PART_ORDER = ["postgres", "kafka", "gateway", "pedidos", "inventario", "pagos"]


def up(with_prometheus: bool) -> None:
    started = time.monotonic()
    start_postgres()
    start_kafka()
    for part in py_parts():
        log(f"starting {part.name} on http://127.0.0.1:{part.port}")
        start_py(part)
    if with_prometheus:
        start_prometheus()
    log(f"stack is up in {time.monotonic() - started:.1f}s")
    status()


def down() -> None:
    for part in reversed(py_parts()):
        stop_group(part.name)
    stop_group(NETPROXY_PART.name)  # whether or not this shell asked for it
    stop_group("prometheus")
    stop_group("kafka", grace_s=30)
    stop_postgres()
    leftovers = stack_processes()
    if leftovers:
        for pid, cmd in leftovers:
            log(f"killing leftover process {pid}: {cmd[:120]}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    log("stack is down")


def stack_processes() -> list[tuple[int, str]]:
    """Processes that belong to this stack, found by what they run, not by pid files."""
    data = pg_data_dir()
    markers = [str(KAFKA_DIR), str(data)]
    markers += [f"-m {p.module}" for p in [*py_parts(), NETPROXY_PART]]
    found = []
    me = os.getpid()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == me:
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        # Backends that outlived a crashed postmaster name neither the data dir nor the stack.
        in_stack = any(m in cmd for m in markers[:2]) or is_cluster_process(int(proc.name), data) or (
            any(cmd.rstrip().endswith(m) for m in markers[2:])
            and f"SAGA_STACK_ROOT={ROOT}".encode() in environ
        )
        if in_stack and alive(int(proc.name)):
            found.append((int(proc.name), cmd))
    return found


def status() -> None:
    rows = [("postgres", f"postgresql://127.0.0.1:{PG_PORT}/{PG_DB}", pg_ready()),
            ("kafka", KAFKA_BOOTSTRAP, port_open(KAFKA_PORT))]
    rows += [(p.name, f"http://127.0.0.1:{p.port}", http_ok(p.health_url())) for p in py_parts()]
    if read_pid("prometheus"):
        rows.append(("prometheus", f"http://127.0.0.1:{PROMETHEUS_PORT}",
                     http_ok(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready")))
    for name, where, ok in rows:
        print(f"  {name:<11} {'up  ' if ok else 'DOWN'}  {where}")


def follow_logs(parts: list[str]) -> None:
    """Prints every part's log as it grows, each line prefixed with the part's name."""
    handles = {}
    for part in parts:
        path = LOGS / f"{part}.log"
        if path.exists():
            f = path.open("r", errors="replace")
            f.seek(0, os.SEEK_END)
            handles[part] = f
    while True:
        quiet = True
        for part, f in handles.items():
            for line in f.readlines():
                quiet = False
                print(f"{part:<10}| {line}", end="", flush=True)
        if quiet:
            time.sleep(0.2)


def stop(part: str) -> None:
    if part == "postgres":
        stop_postgres()
    else:
        stop_group(part, grace_s=30)


def start(part: str, wait: bool = True) -> None:
    if part == "postgres":
        start_postgres()
    elif part == "kafka":
        start_kafka()
    else:
        start_py(next(p for p in [*py_parts(), NETPROXY_PART] if p.name == part), wait)


def restart(part: str) -> None:
    if part == "postgres":
        stop_postgres()
        start_postgres()
    elif part == "kafka":
        stop_group("kafka", grace_s=30)
        start_kafka()
    else:
        target = next(p for p in [*py_parts(), NETPROXY_PART] if p.name == part)
        stop_group(part)
        start_py(target)


def main() -> None:
    os.environ["SAGA_STACK_ROOT"] = str(ROOT)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "status", "logs", "run", "restart",
                                            "start", "stop", "kill", "pg-data-dir"])
    parser.add_argument("part", nargs="?")
    parser.add_argument("--no-wait", action="store_true",
                        help="start: do not wait for health (chaos restarts)")
    parser.add_argument("--prometheus", action="store_true",
                        help="also start Prometheus scraping the services")
    args = parser.parse_args()
    if args.command == "up":
        up(args.prometheus or os.environ.get("WITH_PROMETHEUS") == "1")
    elif args.command == "down":
        down()
    elif args.command == "status":
        status()
    elif args.command == "pg-data-dir":
        print(pg_data_dir())
    elif args.command == "logs":
        follow_logs([args.part] if args.part else [*PART_ORDER, "prometheus"])
    elif args.command == "restart":
        restart(args.part)
    elif args.command == "start":
        start(args.part, wait=not args.no_wait)
    elif args.command == "stop":
        stop(args.part)
    elif args.command == "kill":
        if args.part == "postgres":
            stop_postgres("immediate")  # no checkpoint, no clean shutdown: a crash
        else:
            stop_group(args.part, signal.SIGKILL)
    elif args.command == "run":
        stopping = False

        def stop_once(signum: int, frame: object) -> None:
            # Ctrl-C reaches every process of the terminal's group (make, uv, us), so the
            # signal can come more than once: the first one stops the stack, the rest wait.
            nonlocal stopping
            if not stopping:
                stopping = True
                raise KeyboardInterrupt

        signal.signal(signal.SIGINT, stop_once)
        signal.signal(signal.SIGTERM, stop_once)
        try:
            up(args.prometheus or os.environ.get("WITH_PROMETHEUS") == "1")
            log("following logs; Ctrl-C stops the whole stack")
            follow_logs([*PART_ORDER, "prometheus"])
        except KeyboardInterrupt:
            log("stopping the stack")
        finally:
            down()


if __name__ == "__main__":
    main()
