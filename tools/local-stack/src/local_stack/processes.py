"""The parts' processes: each runs in a process group of its own, with its pid under
``$SAGA_STATE_DIR/run`` and its output appended to its log under ``$SAGA_STATE_DIR/logs``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from local_stack.console import log
from local_stack.settings import LOG_ROTATE_BYTES, LOGS, ROOT, RUN


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


def describe(pids: list[int]) -> str:
    """The pids with their command lines, for messages that name the processes in the way."""
    def cmd(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()
        except OSError:
            return "?"
    return ", ".join(f"{pid} ({cmd(pid)})" for pid in pids)


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
        # Reap it if we are its parent (restart within one local_stack process).
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
