"""What ``make up`` does before it starts PostgreSQL: where its port lies, what it waits for after
a crash, and which processes it counts as the crashed cluster's (tests/e2e/test_postgres_crash.py
crashes the real one)."""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_stack import parts, ports, processes
from local_stack.postgres import crash
from netproxy import layout

ROOT = Path(__file__).resolve().parents[3]
IANA_DYNAMIC = (49152, 65535)


def _defaults(path: str) -> dict[str, int]:
    text = (ROOT / path).read_text()
    return {k: int(v) for k, v in re.findall(r'environ\.get\("(\w*(?:PORT|BASE)\w*)", "(\d+)"\)',
                                             text)}


def test_every_default_port_lies_below_the_ephemeral_ranges() -> None:
    """A listening port inside the kernel's ephemeral range can be taken by any outgoing
    connection (a service reconnecting to PostgreSQL while it is down connected from
    127.0.0.1:55432 to itself), and the part then cannot bind it."""
    stack_ports = _defaults("tools/local-stack/src/local_stack/settings.py")
    proxy = _defaults("tools/netproxy/src/netproxy/layout.py")
    assert proxy["NETPROXY_BASE_PORT"] == layout.CONTROL_PORT
    # The proxy's control port, its routes and Kafka's proxied listeners, for a stack of two
    # instances of each service and three brokers (the test suite's second phase).
    used = {**stack_ports, "netproxy": layout.CONTROL_PORT,
            **{name: port for name, (port, _, _) in layout.stack_routes(0, 0, 2, 3).items()},
            **{f"kafka-{b} {name}": port for b in (1, 2, 3)
               for name, port, _ in layout.kafka_listeners(b, 2)},
            **{f"kafka-{b} {name}": stack_ports[name] + 100 * (b - 1) for b in (2, 3)
               for name in ("KAFKA_PORT", "KAFKA_CONTROLLER_PORT", "KAFKA_TLS_PORT")}}
    low, _ = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert {k: p for k, p in used.items() if p >= min(low, IANA_DYNAMIC[0])} == {}
    assert len(set(used.values())) == len(used), "two parts share a default port"
    harness = _defaults("tools/saga-harness/src/saga_harness/config.py")
    assert stack_ports["PG_PORT"] == harness["PG_PORT"] == _defaults(
        "tools/netproxy/src/netproxy/control.py")["PG_PORT"]


@pytest.fixture
def self_connected() -> Iterator[socket.socket]:
    """A client socket connected from a port to that same port, as a client reconnecting to a
    port in the ephemeral range may be: it holds the port, though nothing listens on it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.connect(s.getsockname())
    try:
        yield s
    finally:
        _close_with_reset(s)


def _close_with_reset(s: socket.socket) -> None:
    """RST rather than FIN: no TIME-WAIT is left holding the port."""
    if s.fileno() != -1:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()


def test_a_port_held_by_a_connection_is_waited_for_then_named(
        self_connected: socket.socket) -> None:
    port = self_connected.getsockname()[1]
    assert not ports.port_bindable(port)
    with pytest.raises(SystemExit, match=rf"127\.0\.0\.1:{port} .*ESTABLISHED"):
        ports.wait_port_free(port, deadline_s=0.5)
    _close_with_reset(self_connected)
    ports.wait_port_free(port, deadline_s=5)


def test_a_port_another_program_listens_on_fails_at_once_naming_it(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        state = tmp_path / "state"
        state.mkdir()
        (state / "pg.location").write_text(str(tmp_path / "pg"))
        res = subprocess.run([sys.executable, "-m", "local_stack", "start",
                              "postgres"], capture_output=True, text=True, timeout=60,
                             env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                  "SAGA_STATE_DIR": str(state),
                                  "PG_PORT": str(port), "STACK_PG_CRASH_WAIT": "30"})
    assert res.returncode != 0
    assert f"port 127.0.0.1:{port} (PG_PORT) is taken by another program" in res.stderr
    assert not (tmp_path / "pg").exists(), "no cluster is made on a port it cannot have"


@contextlib.contextmanager
def _running(argv: list[str], cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, cwd=cwd)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@contextlib.contextmanager
def _fake_crashed_cluster(tmp_path: Path) -> Iterator[tuple[Path, Path, int]]:
    """A data directory whose postmaster.pid names a postmaster that is now a zombie (SIGKILLed,
    not reaped yet), and a program named postgres to stand for its backends."""
    data = tmp_path / "pg"
    data.mkdir()
    postgres = tmp_path / "bin" / "postgres"
    postgres.parent.mkdir()
    shutil.copy(shutil.which("sleep") or "/bin/sleep", postgres)
    postmaster = subprocess.Popen([str(postgres), "600"], cwd=data)
    try:
        postmaster.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _state(postmaster.pid) != "Z":
            assert time.monotonic() < deadline, "the killed process never became a zombie"
            time.sleep(0.01)
        (data / "postmaster.pid").write_text(f"{postmaster.pid}\n{data}\n0\n5432\n{data}\n"
                                             "127.0.0.1\n  0  0\nready   \n")
        yield data, postgres, postmaster.pid
    finally:
        postmaster.wait()


def test_up_waits_for_the_crashed_clusters_own_processes_only(tmp_path: Path) -> None:
    sleep = shutil.which("sleep") or "/bin/sleep"
    elsewhere = tmp_path / "other-cluster"
    elsewhere.mkdir()
    with _fake_crashed_cluster(tmp_path) as (data, postgres, dead), \
            _running([str(postgres), "600"], data) as orphan, \
            _running([str(postgres), "600"], elsewhere), _running([sleep, "600"], data):
        port_lock = data / ".s.PGSQL.5432.lock"  # whichever port the dead postmaster had
        port_lock.write_text(f"{dead}\n{data}\n")
        # Another cluster's postgres and a program that merely sits in the data directory
        # are not this cluster's.
        assert crash.cluster_processes(data) == [orphan.pid]
        with pytest.raises(SystemExit, match=rf"postmaster \(pid {dead}\) died.*{orphan.pid}"):
            crash.clear_crashed_cluster(data, deadline_s=0.5)
        assert (data / "postmaster.pid").exists()
        orphan.kill()
        orphan.wait()
        # The postmaster is a zombie: PostgreSQL would take it for a running postmaster.
        assert _state(dead) == "Z"
        crash.clear_crashed_cluster(data, deadline_s=5)
        assert not (data / "postmaster.pid").exists() and not port_lock.exists()


def test_a_service_port_taken_by_another_program_fails_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that is not the stack's listens on a service's port: ``up`` refuses to start
    the service (it could not bind, and the other program would answer its health check)."""
    monkeypatch.setattr(processes, "RUN", tmp_path)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        part = parts.PyPart("pedidos-test", "nonexistent.module", port)
        spawned: list[object] = []
        monkeypatch.setattr(parts, "spawn", lambda *a, **k: spawned.append(a))
        with pytest.raises(SystemExit, match=rf"127\.0\.0\.1:{port} \(pedidos-test\) is taken"):
            parts.start_py(part, wait=False)
        assert spawned == [], "nothing started on a taken port"
