"""Whether a part can have its port: who holds it (a listener of another program, or a mere
connection that happened to take it) and, for PostgreSQL, a bounded wait for it to be freed."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path

from local_stack.console import log
from local_stack.probes import port_open
from local_stack.processes import describe
from local_stack.settings import PG_CRASH_WAIT_S

TCP_STATES = {"01": "ESTABLISHED", "02": "SYN-SENT", "03": "SYN-RECV", "04": "FIN-WAIT-1",
              "05": "FIN-WAIT-2", "06": "TIME-WAIT", "07": "CLOSE", "08": "CLOSE-WAIT",
              "09": "LAST-ACK", "0A": "LISTEN", "0B": "CLOSING"}


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
