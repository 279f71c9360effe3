"""Drives the local stack's processes from tests: restart with other settings, kill, pause."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from saga_harness.config import ROOT, STATE


def stack(*args: str, env: dict[str, str] | None = None, check: bool = True
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "local_stack", *args],
                          cwd=ROOT, env={**os.environ, **(env or {})}, text=True,
                          capture_output=True, check=check, timeout=300)


def up() -> None:
    res = stack("up", check=False)
    if res.returncode != 0:
        raise RuntimeError(f"the stack did not come up:\n{res.stdout}\n{res.stderr}")


def restart(part: str, env: dict[str, str] | None = None) -> None:
    res = stack("restart", part, env=env, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"restart of {part} failed:\n{res.stdout}\n{res.stderr}")


def stop(part: str) -> None:
    stack("stop", part)


def start(part: str, env: dict[str, str] | None = None) -> None:
    res = stack("start", part, env=env, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"start of {part} failed:\n{res.stdout}\n{res.stderr}")


def pid(part: str) -> int:
    return int((STATE / "run" / f"{part}.pid").read_text().strip())


def signal_part(part: str, sig: signal.Signals) -> None:
    os.killpg(pid(part), sig)


def alive(part: str) -> bool:
    try:
        os.kill(pid(part), 0)
    except (ProcessLookupError, FileNotFoundError):
        return False
    stat = Path(f"/proc/{pid(part)}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
