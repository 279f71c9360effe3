"""What a crashed postmaster of this stack's cluster left behind, and the wait for it to go.

A postmaster killed outright (SIGKILL, the OOM killer) leaves behind its lock files, its shared
memory and its backends, each of which exits only when it notices (a backend in the middle of a
statement finishes it first). A new postmaster refuses to start while the old one's pid is alive
(a zombie not yet reaped by its new parent counts) or while the old shared memory is still
attached, and then cannot bind its port while a socket holds it. ``up`` waits for all of that,
for this cluster only: its processes are the postgres processes whose working directory is its
data directory, which no other cluster shares.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from local_stack.console import log
from local_stack.processes import alive, describe
from local_stack.settings import PG_CRASH_WAIT_S


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
