"""After `make down` no process of the stack is left (run by `make test` after stopping it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from saga_harness.config import ROOT

pytestmark = pytest.mark.after_down

PORTS = {
    "pedidos": int(os.environ.get("PEDIDOS_PORT", "8001")),
    "inventario": int(os.environ.get("INVENTARIO_PORT", "8002")),
    "pagos": int(os.environ.get("PAGOS_PORT", "8003")),
    "gateway": int(os.environ.get("GATEWAY_PORT", "8010")),
    "kafka": int(os.environ.get("KAFKA_PORT", "9092")),
    "kafka-controller": int(os.environ.get("KAFKA_CONTROLLER_PORT", "9093")),
    "postgres": int(os.environ.get("PG_PORT", "25432")),
    "registry": int(os.environ.get("REGISTRY_PORT", "8081")),
    "registry-management": int(os.environ.get("REGISTRY_MANAGEMENT_PORT", "9081")),
}


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_no_port_of_the_stack_is_listening() -> None:
    assert [name for name, port in PORTS.items() if _listening(port)] == []


def test_no_process_of_the_stack_is_left() -> None:
    state = str(Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local")))
    pg_data = subprocess.run([sys.executable, "-m", "local_stack", "pg-data-dir"],
                             capture_output=True, text=True, check=True).stdout.strip()
    leftovers = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (proc / "environ").read_bytes()
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            continue
        started_by_stack = f"SAGA_STACK_ROOT={ROOT}".encode() in env
        runs_stack_part = ("kafka.Kafka" in cmd or "postgres" in cmd.split()[0:1]
                           or any(f"-m {m}" in cmd for m in
                                  ("pedidos", "inventario", "pagos", "fake_gateway")))
        if (started_by_stack and runs_stack_part) or state in cmd or pg_data in cmd:
            leftovers.append((proc.name, cmd[:150]))
    assert leftovers == []
