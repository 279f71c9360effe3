"""``python -m compose_stack``: docker-compose.yml under the project's own podman.

    python -m compose_stack images [--force]     the offline images (compose_stack.images)
    python -m compose_stack up [--build] [ARGS]   images, then podman-compose up -d --wait ARGS
    python -m compose_stack down [-v]             podman-compose down (-v: with the volumes)
    python -m compose_stack ps | logs [SERVICE]
    python -m compose_stack compose ARGS...       podman-compose ARGS, as this package runs it
    python -m compose_stack dotenv [PATH]         a new .env with fresh passwords and keys

The passwords and keys come from the checkout's ``.env`` (docs/deploy.md), or from the file
``SAGA_COMPOSE_ENV_FILE`` names; a variable of the environment wins over the file, as with
docker compose. The host ports are docker-compose.yml's ``*_HOST_PORT`` variables (the local stack's
ports by default): ``up`` refuses, naming it, a port that something else holds.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from dotenv import dotenv_values

from compose_stack import dotenv, engine
from compose_stack.images import build_all, build_services, image_variables, log
from compose_stack.settings import (
    COMPOSE_FILE,
    DEFAULT_HOST_PORTS,
    ENV_FILE,
    ENVIRONMENT_HOST_PORTS,
    FAILED_WAITS,
    PROJECT,
    ROOT,
)
from local_stack.system_programs import require

UP_TIMEOUT_S = float(os.environ.get("SAGA_COMPOSE_UP_TIMEOUT", "900"))


# A one-shot step, or a service, that restarted this often while `up` waited is failing.
CRASH_LOOP_RESTARTS = 3


def env_file_values() -> dict[str, str]:
    """What the env file sets (podman-compose reads it too)."""
    if not ENV_FILE.is_file():
        return {}
    return {k: v for k, v in dotenv_values(ENV_FILE).items() if v is not None}


def host_ports() -> dict[str, int]:
    """The host ports docker-compose.yml will publish: the environment's, else the env file's,
    else its defaults."""
    from_file = env_file_values()
    return {name: int(ENVIRONMENT_HOST_PORTS[name] or from_file.get(name) or default)
            for name, default in DEFAULT_HOST_PORTS.items()}


def compose_command(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "podman_compose", "--podman-path", str(engine.SHIM),
            *(["--env-file", str(ENV_FILE)] if ENV_FILE.is_file() else []),
            "-f", str(COMPOSE_FILE), *args]


def compose_environment() -> dict[str, str]:
    """The project's podman, and the offline images' names unless the caller's environment
    names other images."""
    # An image the env file names is left to it (the environment would win over it).
    from_file = env_file_values()
    return engine.environment(defaults={name: image for name, image in image_variables().items()
                                        if name not in from_file})


def compose(args: Sequence[str], *, check: bool = True, capture: bool = False,
            ) -> subprocess.CompletedProcess[str]:
    """podman-compose ``args`` on docker-compose.yml."""
    return subprocess.run(compose_command(args), cwd=ROOT, env=compose_environment(),
                          check=check, capture_output=capture, text=True)


# What podman-compose labels every container, volume and network of the project with.
OURS = f"label=io.podman.compose.project={PROJECT}"


def project_list(*what: str, template: str) -> str:
    """``podman <what> --filter <the project> --format <template>``, its output."""
    return engine.podman(*what, "--filter", OURS, "--format", template, capture=True,
                         check=False).stdout.decode()


def project_containers(*, all_states: bool = False) -> list[str]:
    return project_list("ps", *(["-a"] if all_states else []), template="{{.Names}}").split()


def project_ports() -> set[int]:
    """The host ports the project's running containers publish."""
    out = project_list("ps", template="{{.Ports}}")
    return {int(port) for port in re.findall(r":(\d+)->", out)}


def taken_ports() -> list[str]:
    """The host ports docker-compose.yml publishes that something other than the project's own
    containers listens on."""
    ours = project_ports()
    taken = []
    for variable, port in host_ports().items():
        if port in ours:
            continue
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                taken.append(f"127.0.0.1:{port} ({variable})")
    return taken


def up(extra: Sequence[str], build: bool) -> int:
    taken = taken_ports()
    if taken:
        log("ports already taken by something else: " + ", ".join(taken))
        log("stop what holds them (the local stack: make down) or set those variables "
            "to free ports")
        return 1
    build_all()
    build_services({**env_file_values(), **compose_environment()}, force=build)
    log("podman-compose up -d --wait")
    # Every image is built above, each once: podman-compose would build an image once per
    # service that runs it, at the same time.
    args = ["up", "-d", "--wait", "--no-build", *extra]
    # podman-compose waits for ever on a dependency that failed (a migration that exited with an
    # error, a service that never started or keeps dying): failures are looked for while it runs,
    # and end the wait.
    FAILED_WAITS.unlink(missing_ok=True)
    began = time.time()
    process = subprocess.Popen(compose_command(args), cwd=ROOT, env=compose_environment(),
                               start_new_session=True)
    deadline = time.monotonic() + UP_TIMEOUT_S
    failed: list[str] = []
    while process.poll() is None:
        failed = failures(began)
        if failed or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait()
            break
        time.sleep(2)
    failed = failed or failures(began)
    if failed:
        log("failed: " + "; ".join(failed))
    elif process.returncode != 0:
        log(f"podman-compose up ended with status {process.returncode}"
            + (f" (not up after {UP_TIMEOUT_S:.0f} s)" if time.monotonic() > deadline else ""))
    if failed or process.returncode != 0:
        report()
        return 1
    log("up")
    return 0


def failures(since: float) -> list[str]:
    """What failed since ``since`` (a Unix time): a one-shot step (restart: "no") that exited
    with a status other than 0, a container that keeps restarting, and the waits the podman
    shim failed (a container that never started)."""
    out = project_list("ps", "-a", template="{{.Names}} {{.State}} {{.ExitCode}}")
    failed = []
    for line in out.splitlines():
        name, state, code = [*line.split(), "", "", ""][:3]
        facts = engine.podman("container", "inspect", "--format",
                              "{{.HostConfig.RestartPolicy.Name}}|{{.RestartCount}}|"
                              "{{.State.StartedAt.Unix}}", name, capture=True,
                              check=False).stdout.decode().strip().split("|")
        if len(facts) != 3:
            continue                                      # removed meanwhile
        policy = "" if facts[0] in ("no", "<no value>") else facts[0]
        restarts, started = int(facts[1] or 0), int(facts[2] or 0)
        # A step that failed in an earlier `up` is started again by this one: not a failure yet.
        if state == "exited" and code not in ("0", "") and not policy and started >= since:
            failed.append(f"{name} exited with status {code}")
        elif policy and restarts >= CRASH_LOOP_RESTARTS:
            failed.append(f"{name} restarted {restarts} times")
    if FAILED_WAITS.exists():
        failed += [line for line in FAILED_WAITS.read_text().splitlines() if line]
    return sorted(set(failed))


def report() -> None:
    """Every container's state, and the last lines of each one's log."""
    engine.podman("ps", "-a", "--filter", OURS, check=False)
    for name in project_containers(all_states=True):
        print(f"== {name}", flush=True)
        engine.podman("logs", "--tail", "20", name, check=False)


def down(volumes: bool) -> int:
    """podman-compose down, then whatever of the project it left: the containers beyond the
    file's count (`up --scale`) and the network they held, and with ``volumes`` the project's
    volumes."""
    rc = compose(["down", *(["-v"] if volumes else [])], check=False).returncode
    left = project_containers(all_states=True)
    # podman-compose makes a pod for the project; its `down` cannot remove it while a container
    # beyond the file's count (`up --scale`) is in it.
    engine.podman("pod", "rm", "--force", f"pod_{PROJECT}", check=False, capture=True)
    if left:
        engine.podman("rm", "--force", "--time", "10", *left, check=False, capture=True)
        networks = project_list("network", "ls", template="{{.Name}}").split()
        if networks:
            engine.podman("network", "rm", *networks, check=False, capture=True)
    if volumes:
        names = project_list("volume", "ls", template="{{.Name}}").split()
        if names:
            engine.podman("volume", "rm", "--force", *names, check=False, capture=True)
    return rc


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m compose_stack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    images = sub.add_parser("images", help="build the offline images")
    images.add_argument("--force", action="store_true", help="make the Debian base again")
    start = sub.add_parser("up", help="images, then podman-compose up -d --wait")
    start.add_argument("--build", action="store_true", help="rebuild the services' images")
    stop = sub.add_parser("down", help="podman-compose down")
    stop.add_argument("-v", "--volumes", action="store_true", help="delete the volumes too")
    sub.add_parser("ps", help="the project's containers")
    logs = sub.add_parser("logs", help="a service's log")
    logs.add_argument("service", nargs="?")
    dotenv_cmd = sub.add_parser("dotenv", help="write a new .env (passwords and keys)")
    dotenv_cmd.add_argument("path", nargs="?", default=str(ROOT / ".env"))
    passthrough = sub.add_parser("compose", help="podman-compose ARGS")
    passthrough.add_argument("args", nargs=argparse.REMAINDER)
    # What follows `up` and `compose` goes to podman-compose as it is (`up --scale pagos-worker=2`).
    ns, extra = parser.parse_known_args(argv)
    if extra and ns.command not in ("up", "compose"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")

    if ns.command in ("images", "up"):
        require(engine.PROGRAMS)
    if ns.command == "images":
        build_all(force=ns.force)
        rc = 0
    elif ns.command == "dotenv":
        if Path(ns.path).exists():
            log(f"{ns.path} exists: not overwritten")
            rc = 1
        else:
            dotenv.write(Path(ns.path))
            log(f"wrote {ns.path} (0600)")
            rc = 0
    elif ns.command == "up":
        rc = up(extra, ns.build)
    elif ns.command == "down":
        rc = down(ns.volumes)
    elif ns.command == "ps":
        rc = compose(["ps"], check=False).returncode
    elif ns.command == "logs":
        rc = compose(["logs", *([ns.service] if ns.service else [])], check=False).returncode
    else:
        rc = compose([*ns.args, *extra], check=False).returncode
    sys.exit(rc)
