"""What podman-compose needs of podman 4.6 and later, for an older podman without systemd.

podman-compose honours ``depends_on: condition: service_healthy`` and ``up --wait`` with
``podman wait --condition=healthy|running|stopped``, which podman has only since 4.6; for an
older podman it ignores both (it starts every container at once and never waits). And podman
schedules a container's healthcheck with a systemd timer: on a machine without systemd the
health of a container stays ``starting`` for ever.

This program stands in for podman (podman-compose's ``--podman-path``). With podman 4.6 or later
on a machine with systemd it runs podman itself, unchanged. Without systemd it answers the waits
below itself, whatever podman's version; with a podman older than 4.6 it also reports version
4.6.0 and leaves out the ``--requires`` of ``podman create`` (see ``without_requires``). It answers
``podman wait --condition=...`` itself, running the containers' healthchecks (``podman
healthcheck run``) while it waits, which is what the systemd timer would have done; every other
command goes to podman unchanged. Its conditions are compose's:

- ``healthy``: the container's healthcheck passes now (a container without one, or with it
  disabled: as ``running``);
- ``running`` (``up --wait`` on a container without a healthcheck): it runs, or it has ended
  with status 0 (a one-shot service, such as a migration, that did its work);
- ``stopped`` (``service_completed_successfully``): it has ended with status 0.

A container that ended with another status and will not be restarted, or that never started,
fails the wait (status 1, its name and what happened on stderr), as it fails ``docker compose
up``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from compose_stack.engine import podman_binary, podman_version
from compose_stack.settings import FAILED_WAITS, STATE

FIRST_WITH_WAIT = (4, 6)
CONDITIONS = {"healthy", "running", "stopped"}


@dataclass(frozen=True)
class WaitRequest:
    condition: str
    names: tuple[str, ...]
    ignore_missing: bool
    interval_s: float


def parse_wait(args: list[str]) -> WaitRequest | None:
    """``podman wait`` arguments as podman-compose writes them, or None for what it is not."""
    condition = None
    ignore = False
    interval = 1.0
    names: list[str] = []
    it = iter(args)
    for arg in it:
        if arg.startswith("--condition="):
            condition = arg.split("=", 1)[1]
        elif arg == "--condition":
            condition = next(it, None)
        elif arg == "--ignore":
            ignore = True
        elif arg.startswith("--interval="):
            interval = _seconds(arg.split("=", 1)[1])
        elif arg in ("--interval", "-i"):
            interval = _seconds(next(it, "1s"))
        elif arg.startswith("-"):
            return None
        else:
            names.append(arg)
    if condition not in CONDITIONS or not names:
        return None
    return WaitRequest(condition, tuple(names), ignore, interval)


def _seconds(text: str) -> float:
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text.rstrip("s"))


# podman-compose starts a container before anything waits for it: one still only created this
# long into a wait did not start (a port taken, say; podman start said why).
NEVER_STARTED_S = 10.0


def verdict(condition: str, state: dict[str, Any], has_healthcheck: bool, healthy: bool,
            restarts: bool, waited_s: float = 0.0) -> str:
    """``met``, ``wait`` or ``failed``, for one container's ``State`` under a condition."""
    status = state.get("Status", "")
    exit_code = int(state.get("ExitCode", 0) or 0)
    ended = status in ("exited", "stopped")
    if ended and exit_code != 0 and not restarts:
        return "failed"
    if status == "created" and waited_s > NEVER_STARTED_S:
        return "failed"
    if condition == "stopped":
        return "met" if ended and exit_code == 0 else "wait"
    if condition == "running":
        return "met" if status == "running" or (ended and exit_code == 0) else "wait"
    # healthy: a container without a healthcheck (or with it disabled, as a one-shot step
    # has) is taken as running is, which is how `up --wait` treats it.
    if not has_healthcheck:
        return verdict("running", state, False, False, restarts, waited_s)
    return "met" if status == "running" and healthy else "wait"


def _inspect(real: str, name: str) -> dict[str, Any] | None:
    out = subprocess.run([real, "container", "inspect", name], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    found = json.loads(out.stdout)
    return found[0] if found else None


def _healthy_now(real: str, name: str) -> bool:
    return subprocess.run([real, "healthcheck", "run", name], capture_output=True).returncode == 0


def note(message: str) -> None:
    """A line in .local/podman/waits.log: what each wait waited for, and for how long."""
    with open(STATE / "waits.log", "a") as out:
        out.write(f"{time.strftime('%H:%M:%S')} {message}\n")


def wait(request: WaitRequest) -> int:
    real = podman_binary()
    pending = list(request.names)
    started = time.monotonic()
    note(f"wait {request.condition}: {' '.join(request.names)}")
    while pending:
        still = []
        for name in pending:
            info = _inspect(real, name)
            if info is None:
                if request.ignore_missing:
                    continue
                print(f"[compose] no such container: {name}", file=sys.stderr)
                return 125
            state = info.get("State", {})
            check = (info.get("Config") or {}).get("Healthcheck") or {}
            has_check = bool(check.get("Test")) and check.get("Test") != ["NONE"]
            policy = ((info.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name", "")
            restarts = policy not in ("", "no")
            healthy = (request.condition == "healthy" and has_check
                       and state.get("Status") == "running" and _healthy_now(real, name))
            outcome = verdict(request.condition, state, has_check, healthy, restarts,
                              time.monotonic() - started)
            if outcome == "met":
                note(f"  {name} {request.condition} after {time.monotonic() - started:.1f} s")
            if outcome == "failed":
                note(f"  {name} failed: status {state.get('ExitCode')}")
                what = ("never started" if state.get("Status") == "created"
                        else f"exited with status {state.get('ExitCode')}")
                print(f"[compose] {name} {what} (podman logs {name})", file=sys.stderr)
                # For `python -m compose_stack up`, which ends at once (podman-compose would
                # retry this wait for ever).
                with open(FAILED_WAITS, "a") as out:
                    out.write(f"{name} {what}\n")
                return 1
            if outcome == "wait":
                still.append(name)
        pending = still
        if pending:
            time.sleep(request.interval_s)
    return 0


def without_requires(args: list[str]) -> list[str]:
    """``podman create`` arguments without ``--requires``: podman before 4.6 cannot start a
    container whose required container requires another in turn ("depends on container ... not
    found in input list"), and podman-compose orders the starts itself anyway (the waits above)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--requires":
            skip = True
        elif not arg.startswith("--requires="):
            kept.append(arg)
    return kept


def without_systemd() -> bool:
    """No systemd to run the healthchecks' timers (a container, a machine booted without it)."""
    return not os.path.isdir("/run/systemd/system")


def main() -> None:
    real = podman_binary()
    # podman-compose writes an empty command word after global options (`podman --version ''`).
    args = [arg for arg in sys.argv[1:] if arg != ""]
    old = podman_version() < FIRST_WITH_WAIT
    if args[:1] == ["wait"] and (old or without_systemd()):
        # Without systemd no healthcheck runs unless these waits run it, even on podman 4.6+.
        request = parse_wait(args[1:])
        if request is not None:
            sys.exit(wait(request))
    if old:
        if args == ["--version"]:
            print("podman version 4.6.0")
            return
        if args[:1] in (["create"], ["run"]):
            args = without_requires(args)
        if args[:1] in (["create"], ["run"], ["start"], ["restart"]):
            sys.exit(without_systemd_noise([real, *args]))
    os.execv(real, [real, *args])


# What podman before 4.6 prints for every container with a healthcheck it starts on a machine
# without systemd (the checks are run by the waits above instead).
SYSTEMD_NOISE = "unable to get systemd connection"


def without_systemd_noise(command: list[str]) -> int:
    """Runs ``command`` with its output as it is, less podman's complaint that it has no systemd
    to schedule healthchecks with."""
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if SYSTEMD_NOISE not in line:
            sys.stderr.write(line)
    return process.wait()
