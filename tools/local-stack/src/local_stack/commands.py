"""What ``python -m local_stack`` does: the whole stack up, down, its status and logs, and one
part at a time (start, stop, restart, kill) for the tests and the chaos suite."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from local_stack.console import log
from local_stack.kafka import start_kafka
from local_stack.kafka_cluster import broker_named, brokers
from local_stack.parts import NETPROXY_PART, py_parts, python_part, start_py, wait_ready
from local_stack.postgres.cluster import start_postgres, stop_postgres
from local_stack.postgres.crash import is_cluster_process
from local_stack.postgres.data_dir import pg_data_dir
from local_stack.postgres.programs import pg_ready
from local_stack.probes import http_json, http_ok, port_open
from local_stack.processes import alive, read_pid, stop_group
from local_stack.prometheus import start_prometheus
from local_stack.registry import server as registry
from local_stack.settings import (
    KAFKA_DIR,
    LOGS,
    PG_DB,
    PG_PORT,
    PROMETHEUS_PORT,
    REGISTRY_DIR,
    REGISTRY_PORT,
    ROOT,
    RUN,
)

# Parts beyond the first instance or broker: SAGA_REPLICAS and SAGA_KAFKA_BROKERS.
EXTRA_INSTANCE = re.compile(r"(kafka|pedidos|inventario|pagos)-\d+")


def part_order() -> list[str]:
    """Every part of this stack, as ``logs`` follows them."""
    return ["postgres", *(b.part for b in brokers()), registry.PART, *(p.name for p in py_parts())]


def extra_instances_running() -> list[str]:
    """Instances and brokers beyond the first that have a pid file, whatever SAGA_REPLICAS and
    SAGA_KAFKA_BROKERS say now: ``down`` stops what an ``up`` with more of them started."""
    return sorted(p.stem for p in RUN.glob("*.pid") if EXTRA_INSTANCE.fullmatch(p.stem))


def up(with_prometheus: bool) -> None:
    started = time.monotonic()
    start_postgres()
    start_kafka()
    # The services wait for the schema registry as they start (sagakit.schema_registry): its
    # JVM starts beside them, the schemas are registered once it is ready, and then the
    # services are waited for.
    registry.start_registry()
    for part in py_parts():
        log(f"starting {part.name} on http://127.0.0.1:{part.port}")
        start_py(part, until_ready=part.service is None)
    registry.wait_registry()
    register_schemas()
    for part in py_parts():
        if part.service:
            wait_ready(part)
    if with_prometheus:
        start_prometheus()
    log(f"stack is up in {time.monotonic() - started:.1f}s")
    status()


def register_schemas() -> None:
    """Every schema version of the contracts into the registry, as the deployment does it
    (``sagactl schemas register``): a version the registry's rules refuse fails ``up`` with
    the registry's verdict."""
    done = subprocess.run([sys.executable, "-m", "sagactl.cli", "schemas", "register"],
                          cwd=ROOT, capture_output=True, text=True)
    said = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        raise SystemExit(f"[stack] the schema registry refused the contracts' schemas "
                         f"(sagactl schemas register):\n{said}")
    log(said.splitlines()[-1] if said else "schemas registered")


def down() -> None:
    extra = extra_instances_running()
    for part in reversed(py_parts()):
        stop_group(part.name)
    for name in extra:
        if not name.startswith("kafka"):
            stop_group(name)
    stop_group(NETPROXY_PART.name)  # whether or not this shell asked for it
    stop_group("prometheus")
    registry.stop_registry()
    for name in sorted({b.part for b in brokers()} | {n for n in extra if n.startswith("kafka")}):
        stop_group(name, grace_s=30)
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
    paths = [str(KAFKA_DIR), str(data), str(REGISTRY_DIR)]
    modules = [f"-m {p.module}" for p in [*py_parts(), NETPROXY_PART]]
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
        in_stack = any(m in cmd for m in paths) or is_cluster_process(int(proc.name), data) or (
            any(cmd.rstrip().endswith(m) for m in modules)
            and f"SAGA_STACK_ROOT={ROOT}".encode() in environ
        )
        if in_stack and alive(int(proc.name)):
            found.append((int(proc.name), cmd))
    return found


def status() -> None:
    """Each part, up or down; for each instance of a service, whether its relay is the one
    that publishes the service's outbox (its /ready says: ``leader`` or ``standby``)."""
    rows = [("postgres", f"postgresql://127.0.0.1:{PG_PORT}/{PG_DB}", pg_ready(), "")]
    rows += [(b.part, f"127.0.0.1:{b.port}", port_open(b.port), "") for b in brokers()]
    rows.append((registry.PART, f"http://127.0.0.1:{REGISTRY_PORT}", registry.ready(), ""))
    for p in py_parts():
        if p.service is None:
            rows.append((p.name, f"http://127.0.0.1:{p.port}", http_ok(p.health_url()), ""))
            continue
        ready = http_json(p.health_url())
        relay = ready.get("relay") if ready else None
        rows.append((p.name, f"http://127.0.0.1:{p.port}", ready is not None and
                     ready.get("status") == "ready", f"relay {relay}" if relay else ""))
    if read_pid("prometheus"):
        rows.append(("prometheus", f"http://127.0.0.1:{PROMETHEUS_PORT}",
                     http_ok(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready"), ""))
    for name, where, ok, note in rows:
        print(f"  {name:<13} {'up  ' if ok else 'DOWN'}  {where:<24} {note}".rstrip())


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


def run(with_prometheus: bool) -> None:
    """``up``, then the logs until Ctrl-C (or SIGTERM), then ``down`` whatever happened."""
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
        up(with_prometheus)
        log("following logs; Ctrl-C stops the whole stack")
        follow_logs([*part_order(), "prometheus"])
    except KeyboardInterrupt:
        log("stopping the stack")
    finally:
        down()


def stop(part: str) -> None:
    if part == "postgres":
        stop_postgres()
    elif part == registry.PART:
        registry.stop_registry()
    else:
        stop_group(part, grace_s=30)


def start(part: str, wait: bool = True) -> None:
    """A broker (``kafka``, ``kafka-2``...): every broker not running is started."""
    if part == "postgres":
        start_postgres()
    elif broker_named(part) is not None:
        start_kafka()
    elif part == registry.PART:
        registry.start_registry()
        if wait:
            registry.wait_registry()
    else:
        start_py(python_part(part), wait)


def restart(part: str) -> None:
    if part == "postgres":
        stop_postgres()
        start_postgres()
    elif broker_named(part) is not None:
        stop_group(part, grace_s=30)
        start_kafka()
    elif part == registry.PART:
        registry.stop_registry()
        registry.start_registry()
        registry.wait_registry()
    else:
        target = python_part(part)
        stop_group(part)
        start_py(target)


def kill(part: str) -> None:
    """A crash of the part: SIGKILL to its group, or PostgreSQL's immediate shutdown."""
    if part == "postgres":
        stop_postgres("immediate")  # no checkpoint, no clean shutdown: a crash
    else:
        stop_group(part, signal.SIGKILL)
